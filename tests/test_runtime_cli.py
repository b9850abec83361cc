"""modeling/runtime/cli.py: a user's error is one line on stderr and exit status 2; a bug keeps its
traceback."""
import subprocess
import sys

from conftest import ROOT

SCRIPT = """
import gc
import sys
from modeling.runtime import cli
def main(argv):
    if sys.argv[1:] == ["frozen"]:
        print(gc.get_freeze_count())
        return
    if sys.argv[1:] == ["value"]:
        raise ValueError("--max_seq_length=600 exceeds 512")
    if sys.argv[1:] == ["missing"]:
        raise FileNotFoundError("vocab.txt: no such file")
    raise KeyError("a bug")
cli.run(main)
"""


def _run(tmp_path, argument):
    script = tmp_path / "tool.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), argument], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=120)


def test_user_errors_are_one_line_and_status_2(tmp_path):
    for argument, message in (("value", "--max_seq_length=600 exceeds 512"),
                              ("missing", "vocab.txt: no such file")):
        process = _run(tmp_path, argument)
        assert process.returncode == 2
        assert process.stderr.strip() == f"tool.py: error: {message}"


def test_a_bug_keeps_its_traceback(tmp_path):
    process = _run(tmp_path, "bug")
    assert process.returncode == 1
    assert "Traceback" in process.stderr and "KeyError: 'a bug'" in process.stderr


def test_what_the_imports_made_is_frozen_before_main(tmp_path):
    """Full collections skip the modules' objects (`cli.run`): the main finds them frozen."""
    process = _run(tmp_path, "frozen")
    assert process.returncode == 0, process.stderr
    assert int(process.stdout) > 10_000  # absl and the standard library's modules alone
