"""shared_flags.py and the scripts' flags: a script defines a flag only if its run reads it.

Each script is loaded in one fresh process, its library entry replaced by a recorder, and its
`main` run on the required flags: every flag the script defines or adopts (its --helpshort)
must be read on the way to that call. A flag read into the options may still go unused by a
task, which no recorder sees; the tasks declare the one such case, padding
(`fine_tuning.Task.PADDING_IS_INERT`), and the last test holds the scripts to it.
convert_checkpoint.py and build_vocab.py are not here: their `main` reads flags across several
calls and branches (--gelu only from a Hugging Face folder), which one recorded run would not
all reach.
"""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

FINE_TUNING = ("modeling.training.fine_tuning", "run",
               ["--output_dir=o", "--bert_config_file=c", "--vocab_file=v"])
SCRIPTS = {
    "run_classifier.py": FINE_TUNING[:2] + (FINE_TUNING[2] + ["--data_dir=d",
                                                              "--task_name=mrpc"],),
    "run_squad.py": FINE_TUNING,
    "run_ner.py": FINE_TUNING[:2] + (FINE_TUNING[2] + ["--data_dir=d"],),
    "run_multiple_choice.py": FINE_TUNING[:2] + (FINE_TUNING[2] + ["--data_dir=d"],),
    "run_pretraining.py": ("modeling.tasks.pretraining", "run",
                           ["--output_dir=o", "--bert_config_file=c", "--input_file=i"]),
    "extract_features.py": ("modeling.tasks.extract_features", "run",
                            ["--input_file=i", "--output_file=o", "--bert_config_file=c",
                             "--init_checkpoint=k", "--vocab_file=v"]),
    "create_pretraining_data.py": ("modeling.data.pretraining_pipeline",
                                   "create_pretraining_data",
                                   ["--input_file=i", "--output_file=o", "--vocab_file=v"]),
}
PADDING_FLAGS = {"dynamic_padding", "padding_multiple", "bucket_by_length"}

# Runs each script's main with its library call recorded; prints, per script, the flags it
# defines, those its main read, and what the call got.
PROGRAM = """
import importlib, json, runpy, sys
from absl import flags

FLAGS, scripts, report = flags.FLAGS, json.loads(sys.argv[1]), {}
for script, (module, function, argv) in scripts.items():
    name = script[:-3]
    namespace = runpy.run_path(script, run_name=name)
    defined = sorted(flag.name for flag in FLAGS.get_key_flags_for_module(name))
    FLAGS([script] + argv)
    calls, read = [], set()
    library = importlib.import_module(module)
    original_call = getattr(library, function)
    setattr(library, function, lambda *args, **kwargs: calls.append(args) or (0, 0))
    get_attribute, get_item = flags.FlagValues.__getattr__, flags.FlagValues.__getitem__
    flags.FlagValues.__getattr__ = lambda self, key: read.add(key) or get_attribute(self, key)
    flags.FlagValues.__getitem__ = lambda self, key: read.add(key) or get_item(self, key)
    try:
        namespace["main"]([script])
    finally:
        flags.FlagValues.__getattr__, flags.FlagValues.__getitem__ = get_attribute, get_item
        setattr(library, function, original_call)
    task = calls[0][0] if calls else None
    report[script] = {
        "defined": defined, "read": sorted(read), "calls": len(calls),
        "padding_is_inert": getattr(task, "PADDING_IS_INERT", None),
        "actions": list(getattr(task, "ACTIONS", []))}
    for flag in defined:  # the next script defines its own
        delattr(FLAGS, flag)
    FLAGS.unparse_flags()
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report():
    process = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(SCRIPTS)], capture_output=True, text=True,
        cwd=ROOT, timeout=300,
        env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.splitlines()[-1])


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_flag_a_script_defines_is_read_on_the_way_to_its_library_call(report, script):
    flags = report[script]
    assert flags["calls"] == 1
    assert len(flags["defined"]) > 3  # the script's own and the adopted shared ones
    assert sorted(set(flags["defined"]) - set(flags["read"])) == []


@pytest.mark.parametrize("script", ["run_classifier.py", "run_multiple_choice.py",
                                    "run_ner.py", "run_squad.py"])
def test_a_fine_tuning_script_has_the_flags_its_task_uses(report, script):
    flags = report[script]
    defined = set(flags["defined"])
    assert PADDING_FLAGS <= defined if flags["padding_is_inert"] else not PADDING_FLAGS & defined
    assert ("do_eval" in defined) == ("do_eval" in flags["actions"])
    if script == "run_squad.py":  # reads the padded positions, as the original
        assert not flags["padding_is_inert"] and "dynamic_padding" not in defined
