"""A Python that has imported TensorFlow and Keras and runs each command it is sent in a child
forked from itself: `python ARGV` without the ~5 s of CPU a fresh process spends on that
import (the suite runs some 150 scripts). tests/scripts.py starts one per test worker.

The child is what a fresh `python script.py args` (or `python -c code args`) is once it has
imported TensorFlow: its own environment, working directory, argv, sys.path, `__main__` and
standard streams (stdin the null device), and Python's exit status (SystemExit's, 1 for an
uncaught exception, a signal's). Nothing has run an op before the fork, so TensorFlow's
runtime, devices, thread pools and XLA's flags (read from the environment on first use) start
in the child. What differs is what happens at import: the import's lines go to this
process's stderr, not the child's, and what the import reads from the environment is this
process's; tests/scripts.py sends here only commands whose environment agrees with it but
for what is read later.

Protocol, one JSON object a line: this process's environment after the imports {"env"} on
stdout; then for each request {"argv", "env", "cwd", "stdout", "stderr"} (the files the
child's streams go to) on stdin, the replies {"pid"} once forked and {"status"} (a wait
status) once it has ended. It ends at the end of stdin.
"""
import builtins
import importlib.util
import json
import os
import sys
import tempfile
import tokenize
import types


def _choose_cpu_kernels():
    """What every script does before TensorFlow loads, from the module's file: the package
    `modeling` stays unimported here, for each child to import its own."""
    path = os.path.join(os.path.dirname(__file__), "..", "modeling", "runtime", "cpu_kernels.py")
    spec = importlib.util.spec_from_file_location("_cpu_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.choose()


_choose_cpu_kernels()
import keras  # noqa: E402, F401  (imports TensorFlow)
import tensorflow  # noqa: E402, F401


def _run_child(request, protocol):
    """In the forked child: becomes `python *request["argv"]` and never returns."""
    for stream in protocol:
        stream.close()
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from TMPDIR
    os.chdir(request["cwd"])
    argv = request["argv"]
    if argv[0] == "-c":
        source, filename, first_path, sys.argv = argv[1], "<string>", "", ["-c", *argv[2:]]
    else:
        with tokenize.open(argv[0]) as file:
            source = file.read()
        filename, sys.argv = argv[0], list(argv)
        first_path = os.path.dirname(os.path.realpath(argv[0]))
    sys.path[:] = [first_path, *_pythonpath(request["env"]), *BASE_PATH]
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    if argv[0] != "-c":
        main.__file__ = filename
    sys.modules["__main__"] = main
    exec(compile(source, filename, "exec"), main.__dict__)
    raise SystemExit(0)


def _pythonpath(env):
    return [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]


# sys.path as Python builds it without the script's folder and PYTHONPATH's entries.
BASE_PATH = [path for path in sys.path[1:] if path not in _pythonpath(os.environ)]


def main():
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a child's output is never mixed into the replies
    replies.write(json.dumps({"env": dict(os.environ)}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request, (requests, replies))
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        replies.write(json.dumps({"status": os.waitpid(pid, 0)[1]}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
