"""The process around the library: atomic outputs and input checks (`files`), the scripts' one-line
errors (`cli`), TensorFlow's start-up noise off stderr (`quiet`), the CPU kernels
(`cpu_kernels`), one run per output folder (`output_lock`), glibc's malloc policy
(`host_memory`) and XLA's compilation cache (`compilation_cache`). Nothing here imports the
model, and nothing imports TensorFlow at module level but `host_memory` and `compilation_cache`,
which scripts reach only once they run TensorFlow anyway."""
