"""glibc's malloc policy for large blocks, which TensorFlow's tf.distribute iterators change.

On Python 3.11, TensorFlow's GeneratorDataset kernel (`generator_dataset_op.cc`, there to stop
a leak of `Dataset.from_generator`) calls `mallopt(M_MMAP_THRESHOLD, 128 KiB)` when it is
built, and tf.distribute builds one inside every iterator of a distributed dataset (its
MultiDeviceIterator). That pins the threshold and turns off glibc's dynamic one for the rest of
the process: every block of 128 KiB or more (oneDNN's matmul packing buffers, most
activations) is then mmap'd and munmap'd at each op, and the kernel faults in and zeroes each
of its pages every time: a fine-tuning step spends a large share of its CPU time in the kernel
(figures in benchmarks/history/kernel_cpu_time.md).

glibc cannot be given its dynamic threshold back. `restore()` sets the highest fixed one,
where the dynamic threshold stops growing (32 MiB on 64-bit), and trims the heap only past
twice that, as glibc's dynamic rule does. Single-device runs avoid the pin altogether by not
building a distributed iterator (`distribution.per_replica_batches`).
"""
import ctypes
import platform

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit


def restore():
    """Puts back glibc's large-block policy after TensorFlow pinned it (see the module doc).

    Returns:
      True if mallopt accepted both settings; False where the C library is not glibc.
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
                and mallopt(M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD_MAX))
