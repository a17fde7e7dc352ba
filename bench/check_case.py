import sys, numpy as np
sys.path.insert(0, 'tests')
import vkgrad as vg
from cases import CASES
for name in sys.argv[1:]:
    case = [c for c in CASES if c.name == name][0]
    args = case.args32()
    print(name); print(vg.check_kernels(case.fun, *args))
