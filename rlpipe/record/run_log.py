"""What a training script keeps while it runs: a CSV that grows a row at a time, a plot redrawn with each row, a
progress bar, and a one-line ending when the run stops, Ctrl-C included. The examples use it; so can any script."""
import csv
import os
import sys
import time


class RunLog:
    """The rows of one run, written as they come.

    ``RunLog(out_dir, name, columns)`` creates ``out_dir`` and starts ``<out_dir>/<name>.csv`` with a header of
    ``columns``. ``write(**row)`` appends a row, flushed at once, and redraws ``<name>.png`` (``plot=(x, y)``
    columns, when matplotlib is installed), so an interrupted run keeps every row it wrote. ``advance(n)`` moves the
    progress bar (tqdm, when installed and ``progress`` is true; otherwise each row is printed, unless ``echo`` is
    false). Used as a context
    manager it ends the bar and turns a Ctrl-C into ``interrupted = True``: the script goes on to print its summary
    instead of a traceback.
    """

    def __init__(self, out_dir, name, columns, *, plot=None, title=None, total=None, unit="frames", progress=True,
                 echo=True):
        os.makedirs(out_dir, exist_ok=True)
        self.stem = os.path.join(out_dir, name)
        self.columns, self.plot, self.title, self.echo = list(columns), plot, title or name, echo
        self.rows, self.interrupted, self.plotted = [], False, False
        self.start = time.perf_counter()
        with open(self.csv_path, "w", newline="") as f:
            csv.writer(f).writerow(self.columns)
        self.bar = progress_bar(total, unit) if progress else None

    @property
    def csv_path(self):
        """Where the rows go: ``<out_dir>/<name>.csv``."""
        return self.stem + ".csv"

    @property
    def seconds(self):
        """Wall-clock seconds since the log was created."""
        return time.perf_counter() - self.start

    def advance(self, n):
        """Moves the progress bar ``n`` units on."""
        if self.bar is not None:
            self.bar.update(n)

    def write(self, **row):
        """Appends one row (every column, no other key) to the CSV and the plot, and shows it."""
        if set(row) != set(self.columns):
            raise KeyError(f"RunLog.write: expected the columns {self.columns}, got {sorted(row)}")
        self.rows.append(row)
        with open(self.csv_path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.columns).writerow(row)
        if self.plot is not None:
            self.plotted = _draw(self.rows, self.plot, self.title, self.stem + ".png")
        shown = {k: v for k, v in row.items() if k != self.columns[0]}
        if self.bar is not None:
            self.bar.set_postfix(shown, refresh=True)
        elif self.echo:
            print(f"{self.columns[0]} {row[self.columns[0]]:>8}  " + "  ".join(f"{k} {_short(v)}" for k, v in
                                                                                shown.items()), flush=True)

    def outputs(self):
        """The files written, for the closing line: ``runs/x.csv`` or ``runs/x.csv and .png``."""
        return self.csv_path + (" and .png" if self.plotted else "")

    def finish(self, outcome, frames=None):
        """Prints the run's closing line: ``outcome``, the time (and frames/s when ``frames`` is given), the files."""
        rate = f" ({frames / self.seconds:,.0f} frames/s)" if frames else ""
        stopped = " (interrupted)" if self.interrupted else ""
        print(f"{outcome}{stopped}, {self.seconds:.1f} s{rate}; wrote {self.outputs()}", flush=True)

    def close(self):
        """Ends the progress bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        self.close()
        if kind is KeyboardInterrupt:
            self.interrupted = True
            print(f"interrupted after {self.seconds:.1f} s; the rows so far are in {self.outputs()}", file=sys.stderr)
            return True
        return False


def _short(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def progress_bar(total, unit="frames"):
    """A tqdm progress bar of ``total`` ``unit``, or None when tqdm is not installed (the ``examples`` extra)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit=unit, dynamic_ncols=True)


def _draw(rows, axes, title, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    x, y = axes
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r[x] for r in rows], [r[y] for r in rows], marker="o")
    ax.set(xlabel=x, ylabel=y, title=title)
    ax.grid(alpha=0.3)
    fig.savefig(path + ".tmp.png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    os.replace(path + ".tmp.png", path)  # a reader never sees a half-written figure
    return True
