"""``wus-sim bench``: time the registered benchmark cases (see :mod:`wus_sim.bench`)."""

import sys

from ..inputs.strict_json import dumps_strict
from .options import add_flag, add_json_option

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "bench", help="benchmark the simulation engines (wall time, messages/s, memory)",
        description="Run the benchmark cases and print: case, engine, simulated time, "
                    "median wall time, messages/s (events / median wall), peak memory.")
    add_flag(p, "--quick", help="the reduced set of small cases (what the tests run)")
    add_json_option(p)
    p.add_argument("--repeat", type=int, default=5, metavar="N", help="timed runs per case (default 5; median reported)")
    p.add_argument("--case", action="append", metavar="TEXT", dest="cases",
                   help="only cases whose name contains TEXT (repeatable)")
    add_flag(p, "--memory", default=True,
             help="measure each case's peak memory in one extra tracemalloc run (--no-memory: skip it)")
    add_flag(p, "--list", help="list the cases and exit")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="also write the --json document to FILE (figures that docs quote are generated, "
                        "not typed)")
    return p


def run(args):
    from ..bench import CASES, format_table, machine_info, run_bench
    from ..inputs.errors import ConfigError

    if args.repeat < 1:
        raise ConfigError("must be >= 1", key_path="--repeat", value=args.repeat)
    if args.list:
        if args.json:  # schema bench-list.v1.json
            print(dumps_strict([{"name": c.name, "engine": c.engine,
                                 "sets": [s for s, on in (("full", c.full), ("quick", c.quick)) if on]}
                                for c in CASES.values()], indent=1))
            return 0
        for case in CASES.values():
            sets = ", ".join(s for s, on in (("full", case.full), ("quick", case.quick)) if on) or \
                "opt-in: runs when --case names it"
            print(f"{case.name}  [{case.engine}; {sets}]")
        return 0
    progress = None
    if not args.json and sys.stderr.isatty():
        progress = lambda case: print(f"  running {case.name} ...", file=sys.stderr)
    records = run_bench(quick=args.quick, repeat=args.repeat, names=args.cases,
                        memory=args.memory, progress=progress)
    if args.cases and not records:
        raise ConfigError("matches no benchmark case (see wus-sim bench --list)", key_path="--case",
                          value=args.cases)
    info = machine_info()
    doc = dumps_strict({"schema_version": 1, "machine": info, "repeat": args.repeat, "quick": args.quick,
                        "cases": records}, indent=1)
    if args.out:
        from ..inputs.writes import write_atomic

        write_atomic(args.out, doc + "\n", what="bench results", named_by="--out")
    if args.json:
        print(doc)
    else:
        load = info["load_average"]
        print(format_table(records))
        capped = sorted({r["repeat"] for r in records if r["repeat"] != args.repeat})
        print(f"\n{args.repeat} runs per case" + (f" ({' or '.join(map(str, capped))} for the cases of a minute)"
                                                  if capped else "")
              + f", median wall time; Python {info['python']}, numpy {info['numpy']}, "
              f"{info['cpus']} CPUs ({info['processor']})"
              + (f", load average {load[0]:g} {load[1]:g} {load[2]:g}" if load else ""))
    return 0
