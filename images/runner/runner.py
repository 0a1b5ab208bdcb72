"""pybox in-image runner.

Usage:
    runner.py run FILE [ARGS...]   run FILE as __main__, like `python FILE`.

It behaves like the plain interpreter (same exit status, same traceback
text, stdin untouched) and adds one thing: matplotlib figures left open when
the program ends are saved as PNG files into $PYBOX_OUTPUTS (when set and
matplotlib was imported). The backend is always headless (MPLBACKEND=Agg).
"""
import os
import runpy
import sys
import traceback

os.environ["MPLBACKEND"] = "Agg"


def save_figures(outdir, max_figures):
    """Save every open matplotlib figure as outdir/figure-N.png."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or not outdir:
        return
    try:
        os.makedirs(outdir, exist_ok=True)
        for n, num in enumerate(plt.get_fignums()[:max_figures], start=1):
            fig = plt.figure(num)
            fig.savefig(os.path.join(outdir, "figure-%d.png" % n), format="png", dpi=100)
        plt.close("all")
    except Exception as e:  # figures are a bonus; never mask the program's own result
        print("pybox: could not save figures: %s" % e, file=sys.stderr)


def strip_runner_frames(tb, path):
    """Drop the runner's and runpy's frames so the traceback starts in user code."""
    t = tb
    while t is not None and t.tb_frame.f_code.co_filename != path:
        t = t.tb_next
    return t or tb


def run_file(path, args):
    sys.argv = [path] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code
    except BaseException as e:
        traceback.print_exception(type(e), e, strip_runner_frames(e.__traceback__, path))
        code = 1
    finally:
        save_figures(os.environ.get("PYBOX_OUTPUTS", ""), int(os.environ.get("PYBOX_MAX_FIGURES", "8")))
    return code


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "run":
        print("usage: runner.py run FILE [ARGS...]", file=sys.stderr)
        return 2
    return run_file(sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(rc)
