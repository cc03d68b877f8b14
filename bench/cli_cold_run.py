"""One timed `jaxcc run` for bench/cli_cold.sh.

python bench/cli_cold_run.py NAME OUT_DIR ARGS...   # runs `python -m jaxcc run ARGS...`

Appends one JSON line to OUT_DIR/cold.jsonl: wall, user and sys seconds of the child,
its exit status, its stdout line count and last line, how many programs the time limit
stopped ("still running after" in its output) and the last line of its stderr that is
not a log line; for a run whose NAME contains "cold", the JAX_LOG_COMPILES lines (tracing and
XLA compile per jit) go to OUT_DIR/compiles_NAME.txt.
"""

import json
import re
import resource
import subprocess
import sys
import time


def main() -> None:
    name, out, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "jaxcc", "run", *args],
                       capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    err = p.stderr.splitlines()
    if "cold" in name:
        keep = [x for x in err if re.search(r"Finished XLA compilation|Finished tracing", x)]
        with open(f"{out}/compiles_{name}.txt", "w") as f:
            f.write("\n".join(keep) + "\n")
    msg = [x for x in err
           if x.strip() and not re.match(r"[WIE]\d{4} ", x) and "Finished" not in x
           and "Compiling" not in x]  # fmt: skip
    row = dict(run=name, wall_s=round(wall, 2), user_s=round(ru.ru_utime, 2),
               sys_s=round(ru.ru_stime, 2), exit=p.returncode,
               stdout_lines=len(p.stdout.splitlines()),
               stdout_last=(p.stdout.splitlines() or [""])[-1][:200],
               timed_out=(p.stdout + p.stderr).count("still running after"),
               stderr_last=msg[-1][:200] if msg else "")  # fmt: skip
    print(json.dumps(row), flush=True)
    with open(f"{out}/cold.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
