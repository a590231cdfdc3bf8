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
            sets = ", ".join(s for s, on in (("full", case.full), ("quick", case.quick)) if on)
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
    if args.json:
        print(dumps_strict({"schema_version": 1, "machine": machine_info(), "repeat": args.repeat, "quick": args.quick,
                          "cases": records}, indent=1))
    else:
        info = machine_info()
        print(format_table(records))
        print(f"\n{args.repeat} runs per case, median wall time; Python {info['python']}, numpy {info['numpy']}, "
              f"{info['cpus']} CPUs ({info['processor']})")
    return 0
