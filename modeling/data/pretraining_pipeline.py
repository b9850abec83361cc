"""Runs `pretraining_data` over real corpora: input globs, shards, worker processes, streaming,
progress and atomic outputs. No TensorFlow is imported here.

A shard is a set of documents with its own rng whose instances are shuffled among themselves.
- One worker, no streaming: a single shard, the whole corpus, `Random(random_seed)`: the
  original's output exactly.
- `num_workers=N`: N shards, document d going to shard d % N, each worker reading the input
  and tokenizing only its documents.
- Streaming (`chunk_bytes > 0`): consecutive chunks of about that many bytes, cut at blank
  lines; workers take chunks in turn, and memory holds one chunk per worker. Seeds follow the
  chunk, so the output does not depend on the number of workers.
Random-next sentences are drawn from the same shard. Output file m is the concatenation of each
shard's file m, in shard order; within a shard, instances go round-robin across the files.
"""
import dataclasses
import glob
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time

from modeling.data import pretraining, records, text
from modeling.runtime import files
from modeling.text import tokenization


def expand_input_patterns(input_file, glob_fn=glob.glob):
    """Comma-separated files or globs -> paths, in the order the original reads them.

    A glob's matches come in the order the file system lists them (not sorted), which is what
    the original's `tf.gfile.Glob` returns; the documents of several files are read in that
    order, so it decides the output.

    Args:
      input_file: the `--input_file` flag's value.
      glob_fn: the glob to use; `tf.io.gfile.glob` reaches remote file systems too.

    Raises:
      ValueError: a pattern matches no file, or a file cannot be read.
    """
    paths = []
    for pattern in filter(None, (p.strip() for p in input_file.split(","))):
        matches = [path for path in glob_fn(pattern) if not os.path.isdir(path)]
        if not matches:
            raise ValueError(f"--input_file pattern {pattern!r} matches no file")
        for path in matches:
            files.check_input(path, "--input_file")
        paths.extend(matches)
    if not paths:
        raise ValueError(f"--input_file {input_file!r} names no file")
    return paths


@dataclasses.dataclass(frozen=True)
class Span:
    """Bytes [start, end) of one file; line numbers count from `first_line`."""
    path: str
    start: int
    end: int
    first_line: int = 1



def read_lines(spans):
    """Yields (line text, size in bytes) from spans, as the original's `tf.gfile` reader sees
    them: split on "\\n" alone, decoded by `text.decode_line`."""
    for span in spans:
        with open(span.path, "rb") as reader:
            reader.seek(span.start)
            position, number = span.start, span.first_line
            for raw in reader:
                if position >= span.end:
                    break
                position += len(raw)
                yield text.decode_line(raw, span.path, number).rstrip("\n"), len(raw)
                number += 1


def whole_files(paths):
    return [Span(path, 0, os.path.getsize(path)) for path in paths]


def plan_chunks(paths, chunk_bytes):
    """Cuts the input into chunks of at least `chunk_bytes`, after blank lines only, so that
    every document lies inside one chunk. A chunk may span files, as documents may.

    Returns:
      list of chunks, each a list of `Span`.
    """
    chunks, current, size = [], [], 0
    for path in paths:
        start, position, number, first_line = 0, 0, 1, 1
        with open(path, "rb") as reader:
            for raw in reader:
                position += len(raw)
                size += len(raw)
                number += 1
                if size >= chunk_bytes and not raw.strip():
                    current.append(Span(path, start, position, first_line))
                    chunks.append(current)
                    current, size, start, first_line = [], 0, position, number
        if position > start:
            current.append(Span(path, start, position, first_line))
    if current:
        chunks.append(current)
    return chunks


@dataclasses.dataclass(frozen=True)
class ShardTask:
    """What one worker needs to make one shard."""
    shard: int  # None for the single exact shard
    spans: tuple
    document_filter: tuple  # (modulus, remainder), or None for every document
    outputs: tuple  # paths this shard writes, one per output file
    names: tuple  # the output files they become part of, for messages
    share: float  # about what part of each output file this shard makes, for messages
    vocab_file: str
    do_lower_case: bool
    options: pretraining.InstanceOptions
    random_seed: int
    dupe_factor: int


@dataclasses.dataclass
class ShardResult:
    outputs: tuple
    documents: int
    instances: int


class _Reporter:
    """Adds up a worker's progress and sends it on at most twice a second."""

    def __init__(self):
        self.sink, self.counts, self.last = None, {}, 0.0

    def add(self, **counts):
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        if time.time() - self.last > 0.5:
            self.flush()

    def flush(self):
        if self.sink is not None and self.counts:
            self.sink.put(self.counts)
        self.counts, self.last = {}, time.time()


_reporter = _Reporter()
_tokenizers = {}


def _init_worker(sink):
    """Sets where this process's progress goes: a queue, a `_ProgressSink`, or None."""
    _reporter.sink = sink


def _start_worker(sink, parent):
    """A pool worker's start: it dies with the parent, so a killed run leaves no worker
    writing on (Linux asks the kernel to send SIGKILL on the parent's death; elsewhere the
    pool's own shutdown is all there is)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
    _init_worker(sink)


def _tokenizer(vocab_file, do_lower_case):
    key = (vocab_file, do_lower_case)
    if key not in _tokenizers:
        _tokenizers[key] = tokenization.FullTokenizer(vocab_file, do_lower_case)
    return _tokenizers[key]


def _shard_lines(task):
    """The shard's lines; with a document filter, other documents' lines become blank."""
    document, (modulus, remainder) = 0, task.document_filter or (1, 0)
    for line, size in read_lines(task.spans):
        _reporter.add(bytes_read=size)
        if not line.strip():
            document += 1
            yield ""
        elif document % modulus == remainder:
            yield line


def make_shard(task):
    """Reads, tokenizes and turns one shard into TFRecords. Runs in a worker process."""
    tokenizer = _tokenizer(task.vocab_file, task.do_lower_case)
    documents = pretraining.read_documents(_shard_lines(task), tokenizer)
    _reporter.add(documents=len(documents))
    rng = pretraining.shard_rng(task.random_seed, task.shard)
    objective = pretraining.OBJECTIVES[task.options.objective]
    maker = objective.maker(tokenizer.vocab, task.options, rng)
    per_document = 1 / max(len(documents), 1)
    encoder = objective.encoder(len(tokenizer.vocab), task.options.max_seq_length,
                                task.options.max_predictions_per_seq)
    instances = pretraining.create_instances(
        documents, maker, task.dupe_factor,
        lambda made: _reporter.add(passes=per_document, instances=made),
        lambda instance: records.frame(encoder.encode(instance)))
    per_instance = 1 / max(len(instances), 1)
    count = len(task.outputs)
    for index, (path, name) in enumerate(zip(task.outputs, task.names)):
        part = instances[index::count]  # round-robin across the output files
        needed = sum(map(len, part)) / task.share
        with files.out_of_space(name, needed), open(path, "wb") as writer:
            for start in range(0, len(part), 256):
                writer.writelines(part[start:start + 256])
                _reporter.add(written=len(part[start:start + 256]) * per_instance)
    _reporter.flush()
    return ShardResult(task.outputs, len(documents), len(instances))


class Progress:
    """Prints documents, instances, MB/s, elapsed and ETA on stderr every few seconds.

    The ETA extrapolates the fraction of the work done, counted as tokenizing the input, the
    `dupe_factor` passes over each shard's documents, and writing each shard's instances.
    """

    def __init__(self, total_bytes, dupe_factor, num_shards, stream=sys.stderr, every=2.0):
        self.total_bytes, self.dupe_factor, self.num_shards = total_bytes, dupe_factor, num_shards
        self.stream, self.every = stream, every
        self.counts = {"bytes_read": 0, "documents": 0, "instances": 0, "passes": 0.0,
                       "written": 0.0}
        self.start = self.last = time.time()

    def add(self, counts):
        for key, value in counts.items():
            self.counts[key] += value
        if time.time() - self.last >= self.every:
            self.print()

    def fraction(self):
        # Measured shares of the work: tokenizing 20%, making and serializing instances 78%,
        # writing the records 2%.
        read = self.counts["bytes_read"] / max(self.total_bytes, 1)
        passes = self.counts["passes"] / (self.num_shards * self.dupe_factor)
        written = self.counts["written"] / self.num_shards
        return min(1.0, 0.2 * read + 0.78 * passes + 0.02 * written)

    def print(self, final=False):
        self.last = time.time()
        elapsed = self.last - self.start
        fraction = 1.0 if final else self.fraction()
        megabytes = self.total_bytes / 1e6 * fraction
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else float("nan")
        print(f"[create_pretraining_data] {self.counts['documents']} documents, "
              f"{self.counts['instances']} instances, {megabytes:.2f}/"
              f"{self.total_bytes / 1e6:.2f} MB, {megabytes / max(elapsed, 1e-9):.2f} MB/s, "
              f"elapsed {elapsed:.0f}s, ETA {eta:.0f}s", file=self.stream, flush=True)


def _plan(paths, outputs, num_workers, chunk_bytes, **task_fields):
    task_fields["names"] = tuple(outputs)
    if chunk_bytes > 0:
        spans_per_shard = plan_chunks(paths, chunk_bytes)
        filters = [None] * len(spans_per_shard)
        total = sum(os.path.getsize(p) for p in paths)
        shares = [sum(span.end - span.start for span in spans) / total
                  for spans in spans_per_shard]
    elif num_workers > 1:
        spans_per_shard = [whole_files(paths)] * num_workers
        filters = [(num_workers, k) for k in range(num_workers)]
        shares = [1 / num_workers] * num_workers
    else:
        return [ShardTask(shard=None, spans=tuple(whole_files(paths)), document_filter=None,
                          outputs=tuple(files.temp_path(p, "final") for p in outputs), share=1.0,
                          **task_fields)]
    return [ShardTask(shard=k, spans=tuple(spans), document_filter=filters[k],
                      outputs=tuple(files.temp_path(p, f"shard{k}") for p in outputs),
                      share=shares[k], **task_fields)
            for k, spans in enumerate(spans_per_shard)]


def create_pretraining_data(input_file, output_file, vocab_file, do_lower_case, options,
                            random_seed, dupe_factor, num_workers=1, chunk_bytes=0,
                            progress_stream=sys.stderr):
    """Writes the TFRecords of `create_pretraining_data.py`; returns (documents, instances).

    Outputs appear only when complete: every file is written under a temporary name and
    renamed at the end.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    if dupe_factor < 1:
        raise ValueError(f"dupe_factor must be at least 1, got {dupe_factor}")
    if chunk_bytes < 0:
        raise ValueError(f"--streaming_chunk_mb must not be negative, got {chunk_bytes / 1e6}")
    paths = expand_input_patterns(input_file)
    files.check_input(vocab_file, "--vocab_file")
    outputs = [p.strip() for p in output_file.split(",") if p.strip()]
    files.check_outputs(outputs, paths + [vocab_file])
    _tokenizer(vocab_file, do_lower_case)  # fails early on a bad vocabulary; workers reuse it
    for path in outputs:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        files.remove_stale_temps(path)
    tasks = _plan(paths, outputs, num_workers, chunk_bytes, vocab_file=vocab_file,
                  do_lower_case=do_lower_case, options=options, random_seed=random_seed,
                  dupe_factor=dupe_factor)
    progress = Progress(sum(os.path.getsize(p) for p in paths), dupe_factor, len(tasks),
                        progress_stream)
    finals = [files.temp_path(p, "final") for p in outputs]
    try:
        documents, instances = _run(tasks, finals, num_workers, progress)
        if instances == 0:
            raise ValueError(f"{input_file}: no document with any token, so no instance")
        for temp, path in zip(finals, outputs):
            files.replace(temp, path)
    finally:
        for task in tasks:
            for path in task.outputs + tuple(finals):
                if os.path.exists(path):
                    os.remove(path)
    progress.print(final=True)
    return documents, instances


def _run(tasks, finals, num_workers, progress):
    if len(tasks) == 1 and tasks[0].shard is None:
        _init_worker(_ProgressSink(progress))
        try:
            result = make_shard(tasks[0])
        finally:
            _init_worker(None)
        return result.documents, result.instances
    context = _pool_context()
    progress_queue = context.Queue()
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(progress_queue, progress, stop), daemon=True)
    documents = instances = 0
    writers = [open(path, "wb") for path in finals]
    try:
        with context.Pool(min(num_workers, len(tasks)), initializer=_start_worker,
                          initargs=(progress_queue, os.getpid())) as pool:
            reader.start()  # after the workers' fork, so that none inherits a lock it holds
            for task, result in zip(tasks, pool.imap(make_shard, tasks)):
                documents += result.documents
                instances += result.instances
                for writer, path, name in zip(writers, result.outputs, task.names):
                    with files.out_of_space(name, os.path.getsize(path) / task.share), \
                            open(path, "rb") as shard_file:
                        while block := shard_file.read(1 << 24):
                            writer.write(block)
                        writer.flush()  # here, where a full disk is named
                    os.remove(path)
    finally:
        for writer in writers:
            writer.close()
        stop.set()
        if reader.ident is not None:  # started
            reader.join()
    return documents, instances


def _pool_context():
    """How to start workers: fork where that is safe, else spawn.

    A forked worker starts at once with the parent's modules and tokenizer; a spawned one starts an
    interpreter that imports them and the script again, a visible share of a short run
    (benchmarks/history/create_pretraining_data.md). Forking is safe only in a process with no
    other thread, since a lock that a thread holds at the fork stays locked in the child;
    TensorFlow runs threads once imported.
    """
    if ("fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            and "tensorflow" not in sys.modules):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class _ProgressSink:
    """Queue-like: lets the in-process shard report straight to `Progress`."""

    def __init__(self, progress):
        self.progress = progress

    def put(self, counts):
        self.progress.add(counts)


def _drain(progress_queue, progress, stop):
    # It polls for `stop` instead of waiting for a last message, which a worker killed while
    # writing to the queue could leave unsent; every run with workers ends by waiting up to
    # one period, so the period is short.
    while not stop.is_set() or not progress_queue.empty():
        try:
            progress.add(progress_queue.get(timeout=0.01))
        except queue.Empty:
            continue
