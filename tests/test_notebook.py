"""vkgrad in Jupyter, through a real kernel (nbclient + ipykernel): an error points at the cell
as IPython names it, and a Program or a compiled step shown as a cell's result is its text."""

import os

import ipykernel  # noqa: F401  (the `test` extra installs these three)
import nbclient
import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CELLS = [
    "import numpy as np, vkgrad as vg, vkgrad.numpy as vnp\n"
    "x = np.ones((3, 4), np.float32)",
    "vg.make_ir(lambda x: vnp.sum(vnp.exp(x) * 2.0))(x)",
    "step = vg.jit(lambda x: vnp.tanh(x) * 3.0, backend='numpy')\n"
    "step.lower(x)",
    "try:\n"
    "    vg.grad(lambda x: vnp.sum(x @ x))(x)\n"
    "except vg.ShapeError as e:\n"
    "    print(e)",
    "import warnings\n"
    "warnings.simplefilter('always', vg.FallbackWarning)\n"
    "with vg.enable_x64():   # float64: no Vulkan kernel computes in it\n"
    "    vg.jit(lambda x: vnp.exp(x) * 2.0, backend='vulkan')(np.ones(3))",
]


def test_notebook_shows_programs_and_names_cells(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    # the kernel (this venv's python, ipykernel's own kernel spec) imports vkgrad from here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()

    def text(cell):
        out = []
        for o in cell.outputs:
            out.append(o.get("text") or o.get("data", {}).get("text/plain", ""))
        return "".join(out)

    program = text(nb.cells[1])
    assert program.startswith("program lambda(%0: f32[3,4]) -> f32[] {"), program
    assert "= exp %0" in program and "<Program" not in program
    compiled = text(nb.cells[2])
    assert "# <vkgrad.jit.Compiled lambda: numpy" in compiled and "= tanh %0" in compiled, \
        compiled
    error = text(nb.cells[3])
    assert "inner dimensions differ" in error and "at Cell In[4], line 2" in error, error
    assert "ipykernel_" not in error
    warning = text(nb.cells[4])
    assert "FallbackWarning" in warning and warning.startswith("Cell In[5]:4:"), warning
    assert "ipykernel_" not in warning
