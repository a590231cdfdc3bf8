"""``validate --tiering``'s files: ``tiering.csv`` (a row per tiering row, the columns of
:data:`~wus_sim.validation.tiering.TIERING_COLUMNS`) and ``tiering.png``.

The figure puts each row's errors on one line: the step time the simulation gives against the
one the page's tokens/s give, in %, for the fit (filled) and for the fit that never saw the row's
model (hollow), over the row's measured band (the step its MFU gives, from 0 to there: the page's
two figures disagree by that much) and light bands at +-10 % and +-20 %, the issue's marks.
"""

import math

from .tiering import TIERING_COLUMNS

__all__ = ["write_tiering_outputs", "tiering_figure"]


def write_tiering_outputs(results, out_dir, *, plot=True, calibration_id=""):
    """Write ``tiering.csv`` (and ``tiering.png``, its title naming *calibration_id*) of *results*
    (:func:`~.tiering.simulate_tiering`'s) to the folder *out_dir*; return the paths."""
    import pandas as pd

    from ..inputs.writes import write_atomic
    from .report import make_output_folder
    from .tiering import as_dicts

    make_output_folder(out_dir)
    frame = pd.DataFrame([{k: r[k] for k in TIERING_COLUMNS} for r in as_dicts(results)], columns=list(TIERING_COLUMNS))
    csv = out_dir / "tiering.csv"
    write_atomic(csv, frame.to_csv(index=False), what="tiering table", named_by="--out")
    files = [csv]
    if plot:
        import matplotlib.pyplot as plt

        png = out_dir / "tiering.png"
        fig = tiering_figure(results, calibration_id)
        try:
            write_atomic(png, lambda f: fig.savefig(f, format="png", dpi=120), what="plot", named_by="--out")
        finally:
            plt.close(fig)
        files.append(png)
    return files


def tiering_figure(results, calibration_id=""):
    """The figure (see the module docstring) of *results*, rows top to bottom in the table's order;
    rows without a simulated time are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if not math.isnan(r.error)]
    fig, ax = plt.subplots(figsize=(11.5, 0.55 * len(rows) + 1.8))
    for band, alpha in ((0.20, 0.08), (0.10, 0.16)):
        ax.axvspan(-100 * band, 100 * band, color="gray", alpha=alpha, lw=0, label=f"±{band:.0%}", zorder=0)
    ax.axvline(0, color="black", lw=1, zorder=1)
    labels = []
    for y, r in enumerate(rows):
        mfu_side = 100 * (r.measured_step_from_mfu_s / r.measured_step_s - 1)
        ax.barh(y, mfu_side, left=0, height=0.5, color="tab:orange", alpha=0.45, zorder=2,
                label="measured band (tokens/s to MFU)" if y == 0 else None)
        ax.scatter(100 * r.error, y, marker="o", s=48, color="tab:blue", zorder=4, label="fit" if y == 0 else None)
        if not math.isnan(r.lomo_error):
            ax.scatter(100 * r.lomo_error, y, marker="D", s=40, facecolors="white", edgecolors="tab:blue",
                       linewidths=1.5, zorder=3, label="leave-one-model-out" if y == 0 else None)
        where = r.topology + (f" x{r.slices}" if r.slices > 1 else "")
        labels.append(f"{r.row}. {r.model}, {where}")
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    reach = max([25.0] + [abs(100 * e) * 1.15 for r in rows for e in (r.error, r.lomo_error) if not math.isnan(e)])
    ax.set_xlim(-reach, reach)
    ax.set_xlabel("simulated step time vs the page's tokens/s [%] (negative: simulated faster)")
    ax.set_title("MaxText's tiering rows, each simulated from its recipe"
                 + (f" (calibration {calibration_id})" if calibration_id else ""), fontsize=11)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig
