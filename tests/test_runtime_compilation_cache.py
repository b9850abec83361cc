import os
import subprocess
import sys
import textwrap

from modeling.runtime import compilation_cache

WHOLE = b"\x0a\x03abc\x10\x07"  # field 1: "abc", field 2: 7
CUT = WHOLE[:4]  # field 1 says 3 bytes, 2 follow


def test_whole_entries_are_linked_in_and_new_ones_published_by_rename(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    root = tmp_path / "cache"
    shared = root / compilation_cache.machine_key()
    shared.mkdir(parents=True)
    (shared / "whole.pb").write_bytes(WHOLE)
    (shared / "cut.pb").write_bytes(CUT)
    (shared / ".half_written.tmp").write_bytes(CUT)
    runs = shared / compilation_cache.RUNS
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    (runs / f"{compilation_cache._host()}-{dead.pid}-abc").mkdir(parents=True)  # killed
    (runs / f"{compilation_cache._host()}-{os.getpid()}-abc").mkdir()  # running
    (runs / f"otherhost-{dead.pid}-abc").mkdir()  # not this host's to judge

    assert compilation_cache.enable(str(root)) == str(shared)
    flag, private = os.environ["TF_XLA_FLAGS"].split("=")
    assert flag == compilation_cache.FLAG and os.path.dirname(private) == str(runs)
    assert sorted(os.listdir(private)) == ["whole.pb"]  # the cut one would fail the run
    assert os.path.samefile(os.path.join(private, "whole.pb"), shared / "whole.pb")  # a link
    assert sorted(os.listdir(runs)) == sorted([f"{compilation_cache._host()}-{os.getpid()}-abc",
                                               f"otherhost-{dead.pid}-abc",
                                               os.path.basename(private)])

    (tmp_path / "new.pb").write_bytes(WHOLE)
    os.rename(tmp_path / "new.pb", os.path.join(private, "new.pb"))
    compilation_cache.publish(private, str(shared), {"whole.pb"})
    assert sorted(os.listdir(shared)) == [".half_written.tmp", ".runs", "cut.pb", "new.pb",
                                          "whole.pb"]
    assert (shared / "new.pb").read_bytes() == WHOLE
    assert (shared / "whole.pb").read_bytes() == WHOLE
    assert not os.path.exists(private)


def test_entries_are_copied_where_the_file_system_has_no_hard_links(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)

    def refused(source, target):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "link", refused)
    shared = tmp_path / compilation_cache.machine_key()
    shared.mkdir()
    (shared / "whole.pb").write_bytes(WHOLE)
    compilation_cache.enable(str(tmp_path))
    private = os.environ["TF_XLA_FLAGS"].split("=")[1]
    copy = os.path.join(private, "whole.pb")
    assert open(copy, "rb").read() == WHOLE and not os.path.samefile(copy, shared / "whole.pb")
    compilation_cache.publish(private, str(shared), {"whole.pb"})


def test_the_whole_check_reads_every_field_header(tmp_path):
    long_field = b"\x1a\x80\x01" + bytes(128)  # field 3, a two-byte length
    cases = {"whole": WHOLE + long_field, "fixed": b"\x0d1234\x09" + bytes(8),
             "cut_in_a_length": WHOLE + b"\x1a\x80", "cut_in_a_field": (WHOLE + long_field)[:-1],
             "cut_fixed": b"\x0d123", "group": b"\x0b", "empty": b""}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    assert [name for name in cases if compilation_cache._is_whole_message(
        str(tmp_path / name))] == ["whole", "fixed"]


def test_a_cache_the_user_set_and_an_empty_directory_change_nothing(tmp_path, monkeypatch):
    own = f"{compilation_cache.FLAG}={tmp_path}"
    monkeypatch.setenv("TF_XLA_FLAGS", own)
    assert compilation_cache.enable(str(tmp_path / "ours")) is None
    assert os.environ["TF_XLA_FLAGS"] == own and not (tmp_path / "ours").exists()
    monkeypatch.delenv("TF_XLA_FLAGS")
    assert compilation_cache.enable("") is None and "TF_XLA_FLAGS" not in os.environ


def test_a_later_process_loads_the_entries_and_survives_a_truncated_one(tmp_path):
    """What TensorFlow does with the cache itself: the first process's compiled program is
    kept; a truncated entry, which TensorFlow fails a run on, is left out and compiled anew."""
    child = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.getcwd()!r})
        from modeling.runtime import compilation_cache
        import tensorflow as tf
        compilation_cache.enable({str(tmp_path)!r})
        double = tf.function(lambda x: 2.0 * x + 1.0, jit_compile=True)
        print(double(tf.ones([3])).numpy().tolist())
    """)
    env = {key: value for key, value in os.environ.items() if key != "TF_XLA_FLAGS"}

    def run():
        result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                                env=env, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip().endswith("[3.0, 3.0, 3.0]")

    run()
    (shared,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    entries = sorted(shared.glob("*.pb"))
    assert not os.listdir(shared / compilation_cache.RUNS)  # the private directory is gone
    assert entries and all(compilation_cache._is_whole_message(str(e)) for e in entries)
    whole = entries[0].read_bytes()
    entries[0].write_bytes(whole[:len(whole) // 2])
    assert not compilation_cache._is_whole_message(str(entries[0]))
    run()
    # Compiled again and published whole (the machine code's bytes vary from one compilation
    # to the next).
    assert compilation_cache._is_whole_message(str(entries[0]))
    assert sorted(shared.glob("*.pb")) == entries and not list(shared.glob(".*.tmp"))


def test_past_its_size_the_cache_loses_its_oldest_entries(tmp_path, monkeypatch):
    def written(path, size, when):
        path.write_bytes(bytes(size))
        os.utime(path, (when, when))
    for index in range(5):
        written(tmp_path / f"entry{index}.pb", 100, 1000 + index)  # 1000 is the oldest
    loop = tmp_path / compilation_cache.LOOPS / "a_loop"
    loop.mkdir(parents=True)
    written(loop / "library.pb", 100, 1000.5)
    written(loop / "entry.json", 50, 1000.5)
    being_written = tmp_path / compilation_cache.LOOPS / ".tmp_loop"
    being_written.mkdir()
    written(being_written / "library.pb", 100, 1)
    written(tmp_path / ".half_written.tmp", 100, 1)

    compilation_cache.prune(str(tmp_path), max_bytes=700)  # 650 bytes: nothing to do
    assert len(list(tmp_path.glob("*.pb"))) == 5 and loop.exists()
    compilation_cache.prune(str(tmp_path), max_bytes=500)  # down to 450 at most, oldest first
    assert sorted(p.name for p in tmp_path.glob("*.pb")) == [f"entry{i}.pb" for i in (1, 2, 3, 4)]
    assert not loop.exists() and being_written.exists()
    assert (tmp_path / ".half_written.tmp").exists()

    monkeypatch.setattr(compilation_cache, "MAX_BYTES", 250)  # every run's end prunes
    private = tmp_path / compilation_cache.RUNS / "a_run"
    private.mkdir(parents=True)
    written(private / "new.pb", 100, 2000)
    compilation_cache.publish(str(private), str(tmp_path))
    assert sorted(p.name for p in tmp_path.glob("*.pb")) == ["entry4.pb", "new.pb"]
