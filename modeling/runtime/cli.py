"""What every script shares: user errors (and a full disk) become one line on stderr and exit
status 2."""
import gc
import os
import sys

from absl import app, flags

from modeling.runtime import compilation_cache, files


def _fail(error):
    print(f"{os.path.basename(sys.argv[0])}: error: {error}", file=sys.stderr)
    sys.exit(2)


def _parse_flags(argv):
    """absl's parser, with a bad or missing flag as one line instead of FATAL plus usage.

    A training script's --xla_cache_dir takes effect here: absl's start-up after the parser,
    before `main`, already has TensorFlow read its XLA settings (measured)."""
    try:
        remaining = flags.FLAGS(argv)
    except flags.Error as error:
        _fail("; ".join(str(error).splitlines()) + " (see --helpshort)")
    if "xla_cache_dir" in flags.FLAGS:
        compilation_cache.enable(flags.FLAGS.xla_cache_dir)
    return remaining


def run(main):
    """Runs an absl `main`, turning the errors a user can cause into a one-line message.

    ValueError and FileNotFoundError carry messages that name the file, line or value at fault;
    a traceback would only bury them. So does `files.OutOfSpace`, a full disk: the user's to
    fix, and the run's to resume. Anything else is a bug and keeps its traceback.
    """
    def guarded(argv):
        try:
            return main(argv)
        except (ValueError, FileNotFoundError, files.OutOfSpace) as error:
            _fail(error)
    # What the imports made (TensorFlow's and Keras' modules, millions of objects) lives as
    # long as the process: frozen, Python's full collections stop walking it again and again
    # (measured: 0.9 s of collections a fine-tuning run, 0.2 s of them in its first step).
    gc.freeze()
    app.run(guarded, flags_parser=_parse_flags)
