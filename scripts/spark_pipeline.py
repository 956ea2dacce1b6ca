#!/usr/bin/env python3
"""Run traj stages over a dataset with PySpark, partition by partition.

    spark_pipeline.py INPUT OUTPUT_DIR 'STAGE ARGS' ['STAGE ARGS' ...]

Examples:
    # normalize then filter every JSONL file under raw/, two local cores
    scripts/spark_pipeline.py raw/ out/ 'traj-normalize' 'traj-filter --well-formed'
    # Parquet from the Hub, on a cluster (binaries shipped to the executors)
    spark-submit scripts/spark_pipeline.py --master yarn hf/snapshot/ s3a://b/out \\
        'traj-normalize' 'traj-compress --offline --target-max-tokens 8000'

INPUT is a file, a glob or a directory of JSONL (plain, .gz) or Parquet files. Each stage
is a traj binary with its flags. The binaries are shipped to the executors with
SparkContext.addFile and found there with SparkFiles.get; each partition's lines go
through the stages as subprocesses, one after the other. Every stage's exit code is
checked: a stage that fails (a bad line under the strict default, exit 1) fails the
task, and after Spark's retries the job, with the stage's stderr in the error, so rows are
never lost silently. Each stage's rejects go to OUTPUT_DIR/rejects/STAGE-K-part-P.jsonl
(K: the stage's position, P: the partition), the rows to OUTPUT_DIR/data/part-*.

Why not RDD.pipe: it takes one command for every partition, so each partition's rejects
could not get a file of their own; the runner below does what RDD.pipe(checkCode=True)
does (stdin from the partition, stdout as the new partition, exit code checked) and more.
"""

import os
import shlex
import subprocess
import sys
import threading
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import traj_stages  # noqa: E402


def parse_args(argv):
    p = traj_stages.stage_parser("PySpark", __doc__)
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[2])")
    p.add_argument("--partitions", type=int, default=None, help="minimum number of partitions of JSONL input")
    return p.parse_args(argv)


def find_binary(name, bin_dir):
    return traj_stages.find_binary(name, bin_dir, "spark_pipeline")


def run_stage(argv, lines, rejects):
    """Run one stage over an iterator of lines (str, no newline); return its output lines.
    Raises when the stage exits non-zero."""
    cmd = argv + ["--rejects", rejects, "--quiet"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = []
    t_err = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    t_err.start()

    def feed():
        try:
            for line in lines:
                proc.stdin.write(line.encode("utf-8") + b"\n")
        except BrokenPipeError:
            pass
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass

    t_in = threading.Thread(target=feed)
    t_in.start()
    out = proc.stdout.read()
    t_in.join()
    code = proc.wait()
    t_err.join()
    if code != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} exited {code}: {err[0].decode('utf-8', 'replace').strip()}"
        )
    # Rows end with "\n" only: str.splitlines would also cut a row at a U+2028, U+2029 or
    # U+0085 that a JSON string holds as it is, and every stage keeps such bytes.
    return [line for line in out.decode("utf-8").split("\n") if line]


def partition_runner(stages, rejects_dir):
    """The function each partition goes through: the stages in turn."""

    def run(index, lines):
        from pyspark import SparkFiles

        current = lines
        for k, (name, args) in enumerate(stages):
            argv = [SparkFiles.get(name)] + args
            rejects = os.path.join(rejects_dir, f"{name}-{k}-part-{index:05d}.jsonl")
            current = run_stage(argv, current, rejects)
        return iter(current)

    return run


def is_parquet_input(path):
    if os.path.isdir(path):
        return any(f.endswith(".parquet") for _, _, fs in os.walk(path, followlinks=True) for f in fs)
    return path.endswith(".parquet")


def main(argv):
    a = parse_args(argv)
    stages = traj_stages.parse_stages(a.stages, "spark_pipeline")

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("traj-pipeline")
    if a.master or not os.environ.get("SPARK_MASTER"):
        builder = builder.master(a.master or "local[2]")
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    for name in {n for n, _ in stages}:
        sc.addFile(find_binary(name, a.bin_dir))

    if is_parquet_input(a.input):
        # Parquet rows as JSON lines (nested lists and structs as arrays and objects).
        # Null fields are kept (Spark's JSON writer drops them by default), so a row keeps
        # every column it has. PySpark 4's classic DataFrame.toJSON returns an RDD of str;
        # Spark Connect returns a DataFrame of one string column.
        spark.conf.set("spark.sql.jsonGenerator.ignoreNullFields", "false")
        with warnings.catch_warnings():  # "toJSON will return a DataFrame in future releases"
            warnings.simplefilter("ignore", UserWarning)
            as_json = spark.read.parquet(a.input).toJSON()
        lines = as_json if hasattr(as_json, "mapPartitionsWithIndex") else as_json.rdd.map(lambda r: r[0])
    else:
        path = os.path.join(a.input, "**") if os.path.isdir(a.input) else a.input
        lines = sc.textFile(path, minPartitions=a.partitions) if a.partitions else sc.textFile(path)

    rejects_dir = os.path.join(a.output_dir, "rejects")
    os.makedirs(rejects_dir, exist_ok=True)
    out = lines.mapPartitionsWithIndex(partition_runner(stages, rejects_dir))
    try:
        out.saveAsTextFile(os.path.join(a.output_dir, "data"))
    except Exception as e:  # the first line of a stage's failure, not Spark's whole trace
        msg = str(e)
        first = next((l for l in msg.splitlines() if "exited" in l), msg.splitlines()[0] if msg else repr(e))
        print(f"spark_pipeline: a stage failed: {first.strip()}", file=sys.stderr)
        spark.stop()
        return 1
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
