"""modeling/runtime/files.py: outputs that appear only when complete."""
import os

import pytest

from modeling.runtime import files
from scripts import dead_pid


def test_the_temporary_name_is_beside_the_output_and_marked_with_the_process():
    assert files.temp_path("out/a.txt") == f"out/a.txt.tmp-{os.getpid()}"
    assert files.temp_path("out/a.txt", "shard3") == f"out/a.txt.tmp-{os.getpid()}-shard3"


def test_atomic_write_replaces_the_output_only_when_complete(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with files.atomic_write(str(path)) as writer:
        writer.write("café\r\n")
        assert path.read_text() == "old\n"  # not yet
        assert os.path.exists(files.temp_path(str(path)))
    assert path.read_bytes() == "café\r\n".encode("utf-8")  # UTF-8, newlines as written
    assert os.listdir(tmp_path) == ["out.txt"]


def test_a_failed_write_leaves_the_old_output_and_no_temporary_file(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with files.atomic_write(str(path), "wb", tag="x") as writer:
            writer.write(b"half")
            raise RuntimeError("disk on fire")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_atomic_path_for_a_directory_and_for_a_suffix_a_writer_insists_on(tmp_path):
    final = tmp_path / "1234"
    with files.atomic_path(str(final)) as temp:
        assert temp == files.temp_path(str(final))
        os.makedirs(os.path.join(temp, "variables"))
        assert not final.exists()
    assert sorted(os.listdir(tmp_path)) == ["1234"] and (final / "variables").is_dir()

    with pytest.raises(ValueError, match="interrupted"):
        with files.atomic_path(str(tmp_path / "5678")) as temp:
            os.makedirs(os.path.join(temp, "variables"))
            raise ValueError("interrupted")
    assert sorted(os.listdir(tmp_path)) == ["1234"]  # the half-written directory is gone

    dead = dead_pid()
    (tmp_path / f"m.tmp-{dead}.keras").touch()  # killed writers' temporaries
    (tmp_path / f"5678.tmp-{dead}" / "variables").mkdir(parents=True)
    (tmp_path / f"m.tmp-{os.getppid()}.keras").touch()  # a live writer's: kept
    with files.atomic_path(str(tmp_path / "m.keras"), suffix=".keras") as temp:
        assert temp == str(tmp_path / f"m.tmp-{os.getpid()}.keras")
        open(temp, "w").close()
    assert sorted(os.listdir(tmp_path)) == ["1234", f"5678.tmp-{dead}", "m.keras",
                                            f"m.tmp-{os.getppid()}.keras"]
    with files.atomic_path(str(tmp_path / "5678")) as temp:
        os.makedirs(temp)
    assert sorted(os.listdir(tmp_path)) == ["1234", "5678", "m.keras",
                                            f"m.tmp-{os.getppid()}.keras"]
    with pytest.raises(ValueError, match="does not end in .keras"):
        with files.atomic_path(str(tmp_path / "m.h5"), suffix=".keras"):
            pass


def test_outputs_in_a_missing_directory_make_it(tmp_path):
    """`check_outputs` accepts a directory that can be made; the writers make it."""
    path = tmp_path / "new" / "deeper" / "out.txt"
    files.check_outputs([str(path)])
    with files.atomic_write(str(path)) as writer:
        writer.write("x")
    with files.atomic_path(str(tmp_path / "other" / "m.keras"), suffix=".keras") as temp:
        open(temp, "w").close()
    assert path.read_text() == "x" and (tmp_path / "other" / "m.keras").exists()


def test_eval_results_are_key_equals_value_lines(tmp_path):
    path = tmp_path / "eval_results.txt"
    files.write_eval_results({"loss": 0.5, "global_step": 3, "eval_accuracy": 1.0}, str(path))
    assert path.read_text() == "eval_accuracy = 1.0\nglobal_step = 3\nloss = 0.5\n"
    files.write_eval_results({"loss": 0.5, "global_step": 3}, str(path), ["loss", "global_step"])
    assert path.read_text() == "loss = 0.5\nglobal_step = 3\n"
