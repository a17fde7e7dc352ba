"""What the driver made of each cooperative-matrix matmul config: the statistics and internal
representations of VK_KHR_pipeline_executable_properties (NVIDIA reports a register count;
registers x 128 threads bound how many workgroups share a multiprocessor, and so how much of
the memory latency other workgroups hide). A Vulkan device of its own through ctypes (kp does
not expose the extension), the same kernels as bench/coop_matmul_probe.py.

    python3 bench/coop_pipeline_stats.py [--configs A,B] [--layouts nn,tn,nt] [--out DIR]

Prints one line per config and layout; with --out, writes stats.json and each internal
representation the driver gives as text (e.g. its assembly) under DIR. Without a device with
VK_KHR_cooperative_matrix, `--shader matmul.comp` shows the same for one of the other kernels.
"""

from __future__ import annotations

import argparse
import ctypes as C
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import coop_matmul_probe as probe  # noqa: E402
from vkgrad.runtime.shaders import compile_file  # noqa: E402

VK_API_1_3 = (1 << 22) | (3 << 12)
# structure types
ST_APP, ST_INSTANCE, ST_QUEUE, ST_DEVICE = 0, 1, 2, 3
ST_SHADER_MODULE, ST_STAGE, ST_COMPUTE_PIPELINE, ST_PIPELINE_LAYOUT, ST_DSL = 16, 18, 29, 30, 32
ST_FEATURES2, ST_VK11, ST_VK12, ST_VK13 = 1000059000, 49, 51, 53
ST_COOPMAT_FEATURES, ST_EXEC_FEATURES, ST_BF16_FEATURES = 1000506000, 1000269000, 1000141000
ST_PIPELINE_INFO, ST_EXEC_PROPS, ST_EXEC_INFO, ST_EXEC_STAT, ST_EXEC_IR = (
    1000269002, 1000269003, 1000269004, 1000269005, 1000269006)
CAPTURE_STATISTICS, CAPTURE_IR = 0x40, 0x80
COMPUTE = 0x20
STORAGE_BUFFER = 7
P = C.c_void_p
U64 = C.c_uint64


def struct(name, fields):
    return type(name, (C.Structure,), {"_fields_": fields})


AppInfo = struct("AppInfo", [("sType", C.c_uint32), ("pNext", P), ("name", C.c_char_p),
                             ("ver", C.c_uint32), ("engine", C.c_char_p), ("ever", C.c_uint32),
                             ("api", C.c_uint32)])
InstanceInfo = struct("InstanceInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                                       ("app", C.POINTER(AppInfo)), ("nLayers", C.c_uint32),
                                       ("layers", P), ("nExt", C.c_uint32), ("ext", P)])
QueueFamily = struct("QueueFamily", [("flags", C.c_uint32), ("count", C.c_uint32),
                                     ("ts", C.c_uint32), ("gran", C.c_uint32 * 3)])
QueueInfo = struct("QueueInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                                 ("family", C.c_uint32), ("count", C.c_uint32),
                                 ("prio", C.POINTER(C.c_float))])
DeviceInfo = struct("DeviceInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                                   ("nQueues", C.c_uint32), ("queues", C.POINTER(QueueInfo)),
                                   ("nLayers", C.c_uint32), ("layers", P), ("nExt", C.c_uint32),
                                   ("ext", P), ("features", P)])
ExtProps = struct("ExtProps", [("name", C.c_char * 256), ("spec", C.c_uint32)])
# a feature structure of any type: its header, then room for every VkBool32 it may have
Features = struct("Features", [("sType", C.c_uint32), ("pNext", P), ("bools", C.c_uint32 * 128)])
DslBinding = struct("DslBinding", [("binding", C.c_uint32), ("type", C.c_uint32),
                                   ("count", C.c_uint32), ("stages", C.c_uint32),
                                   ("samplers", P)])
DslInfo = struct("DslInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                             ("n", C.c_uint32), ("bindings", C.POINTER(DslBinding))])
PushRange = struct("PushRange", [("stages", C.c_uint32), ("offset", C.c_uint32),
                                 ("size", C.c_uint32)])
LayoutInfo = struct("LayoutInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                                   ("nSets", C.c_uint32), ("sets", C.POINTER(U64)),
                                   ("nPush", C.c_uint32), ("push", C.POINTER(PushRange))])
ModuleInfo = struct("ModuleInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                                   ("size", C.c_size_t), ("code", P)])
StageInfo = struct("StageInfo", [("sType", C.c_uint32), ("pNext", P), ("flags", C.c_uint32),
                                 ("stage", C.c_uint32), ("module", U64), ("name", C.c_char_p),
                                 ("spec", P)])
PipelineInfo = struct("PipelineInfo", [("sType", C.c_uint32), ("pNext", P),
                                       ("flags", C.c_uint32), ("stage", StageInfo),
                                       ("layout", U64), ("base", U64), ("baseIndex", C.c_int32)])
PipeInfoKHR = struct("PipeInfoKHR", [("sType", C.c_uint32), ("pNext", P), ("pipeline", U64)])
ExecProps = struct("ExecProps", [("sType", C.c_uint32), ("pNext", P), ("stages", C.c_uint32),
                                 ("name", C.c_char * 256), ("desc", C.c_char * 256),
                                 ("subgroup", C.c_uint32)])
ExecInfo = struct("ExecInfo", [("sType", C.c_uint32), ("pNext", P), ("pipeline", U64),
                               ("index", C.c_uint32)])
ExecStat = struct("ExecStat", [("sType", C.c_uint32), ("pNext", P), ("name", C.c_char * 256),
                               ("desc", C.c_char * 256), ("format", C.c_uint32),
                               ("value", C.c_uint64)])
ExecIR = struct("ExecIR", [("sType", C.c_uint32), ("pNext", P), ("name", C.c_char * 256),
                           ("desc", C.c_char * 256), ("isText", C.c_uint32),
                           ("size", C.c_size_t), ("data", P)])


def check(res, what):
    if res != 0:
        raise RuntimeError(f"{what} failed: VkResult {res}")


class Device:
    """A Vulkan 1.3 device with every feature it has (robustBufferAccess off, as kp), and
    VK_KHR_pipeline_executable_properties (+ cooperative matrices and bfloat16 where it has
    them)."""

    def __init__(self, index=0):
        vk = self.vk = C.CDLL("libvulkan.so.1")
        app = AppInfo(ST_APP, None, b"coop_pipeline_stats", 1, b"vkgrad", 1, VK_API_1_3)
        inst = P()
        check(vk.vkCreateInstance(C.byref(InstanceInfo(ST_INSTANCE, None, 0, C.pointer(app),
                                                        0, None, 0, None)), None,
                                  C.byref(inst)), "vkCreateInstance")
        self.instance = inst
        n = C.c_uint32()
        vk.vkEnumeratePhysicalDevices(inst, C.byref(n), None)
        phys = (P * n.value)()
        vk.vkEnumeratePhysicalDevices(inst, C.byref(n), phys)
        pd = P(phys[index])
        vk.vkEnumerateDeviceExtensionProperties(pd, None, C.byref(n), None)
        exts = (ExtProps * n.value)()
        vk.vkEnumerateDeviceExtensionProperties(pd, None, C.byref(n), exts)
        have = {e.name.decode() for e in exts}
        # without it (lavapipe 22.3) the pipelines are still built: no statistics
        self.has_stats = "VK_KHR_pipeline_executable_properties" in have
        want = [e for e in ("VK_KHR_pipeline_executable_properties", "VK_KHR_cooperative_matrix",
                            "VK_KHR_shader_bfloat16") if e in have]
        self.extensions = want
        chain_types = [ST_VK11, ST_VK12, ST_VK13] + [ST_EXEC_FEATURES] * self.has_stats
        if "VK_KHR_cooperative_matrix" in have:
            chain_types.append(ST_COOPMAT_FEATURES)
        if "VK_KHR_shader_bfloat16" in have:
            chain_types.append(ST_BF16_FEATURES)
        self._chain = [Features(t, None) for t in [ST_FEATURES2] + chain_types]
        for a, b in zip(self._chain, self._chain[1:]):
            a.pNext = C.cast(C.pointer(b), P)
        vk.vkGetPhysicalDeviceFeatures2(pd, C.byref(self._chain[0]))
        # no robustness (as kp: it costs speed): robustBufferAccess, robustImageAccess,
        # cooperativeMatrixRobustBufferAccess
        self._chain[0].bools[0] = 0
        for f in self._chain:
            if f.sType == ST_VK13:
                f.bools[0] = 0
            if f.sType == ST_COOPMAT_FEATURES:
                f.bools[1] = 0
        vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, C.byref(n), None)
        fams = (QueueFamily * n.value)()
        vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, C.byref(n), fams)
        family = next(i for i, f in enumerate(fams) if f.flags & 2)    # compute
        prio = C.c_float(1.0)
        q = QueueInfo(ST_QUEUE, None, 0, family, 1, C.pointer(prio))
        names = (C.c_char_p * len(want))(*[w.encode() for w in want])
        dev = P()
        check(vk.vkCreateDevice(pd, C.byref(DeviceInfo(
            ST_DEVICE, C.cast(C.pointer(self._chain[0]), P), 0, 1, C.pointer(q), 0, None,
            len(want), C.cast(names, P), None)), None, C.byref(dev)), "vkCreateDevice")
        self.device = dev
        get = vk.vkGetDeviceProcAddr
        get.restype = P
        get.argtypes = [P, C.c_char_p]
        if self.has_stats:
            proto = C.CFUNCTYPE(C.c_int32, P, P, P, P)
            self.get_props = proto(get(dev, b"vkGetPipelineExecutablePropertiesKHR"))
            self.get_stats = proto(get(dev, b"vkGetPipelineExecutableStatisticsKHR"))
            self.get_irs = proto(get(dev, b"vkGetPipelineExecutableInternalRepresentationsKHR"))
        binds = (DslBinding * 3)(*[DslBinding(i, STORAGE_BUFFER, 1, COMPUTE, None)
                                   for i in range(3)])
        dsl = U64()
        check(vk.vkCreateDescriptorSetLayout(dev, C.byref(DslInfo(ST_DSL, None, 0, 3, binds)),
                                             None, C.byref(dsl)), "vkCreateDescriptorSetLayout")
        push = PushRange(COMPUTE, 0, 9 * 4)
        self.layout = U64()
        check(vk.vkCreatePipelineLayout(dev, C.byref(LayoutInfo(
            ST_PIPELINE_LAYOUT, None, 0, 1, C.pointer(dsl), 1, C.pointer(push))), None,
            C.byref(self.layout)), "vkCreatePipelineLayout")

    def pipeline_stats(self, spirv: bytes):
        """[{name, description, subgroup, stats: {name: value}, irs: {name: text}}] of the
        executables of a compute pipeline built from `spirv`."""
        vk, dev = self.vk, self.device
        code = C.create_string_buffer(spirv, len(spirv))
        module = U64()
        check(vk.vkCreateShaderModule(dev, C.byref(ModuleInfo(
            ST_SHADER_MODULE, None, 0, len(spirv), C.cast(code, P))), None, C.byref(module)),
            "vkCreateShaderModule")
        stage = StageInfo(ST_STAGE, None, 0, COMPUTE, module, b"main", None)
        flags = CAPTURE_STATISTICS | CAPTURE_IR if self.has_stats else 0
        info = PipelineInfo(ST_COMPUTE_PIPELINE, None, flags, stage, self.layout, 0, -1)
        pipe = U64()
        check(vk.vkCreateComputePipelines(dev, U64(0), 1, C.byref(info), None, C.byref(pipe)),
              "vkCreateComputePipelines")
        if not self.has_stats:
            vk.vkDestroyPipeline(dev, pipe, None)
            vk.vkDestroyShaderModule(dev, module, None)
            return []
        pinfo = PipeInfoKHR(ST_PIPELINE_INFO, None, pipe)
        n = C.c_uint32()
        check(self.get_props(dev, C.addressof(pinfo), C.addressof(n), None), "properties")
        props = (ExecProps * n.value)(*[ExecProps(ST_EXEC_PROPS) for _ in range(n.value)])
        check(self.get_props(dev, C.addressof(pinfo), C.addressof(n), C.addressof(props)),
              "properties")
        out = []
        for i, pr in enumerate(props):
            einfo = ExecInfo(ST_EXEC_INFO, None, pipe, i)
            m = C.c_uint32()
            self.get_stats(dev, C.addressof(einfo), C.addressof(m), None)
            stats = (ExecStat * m.value)(*[ExecStat(ST_EXEC_STAT) for _ in range(m.value)])
            self.get_stats(dev, C.addressof(einfo), C.addressof(m), C.addressof(stats))
            values = {}
            for s in stats:
                v = s.value
                if s.format == 3:     # FLOAT64
                    v = C.c_double.from_buffer_copy(C.c_uint64(v)).value
                elif s.format == 1:   # INT64
                    v = C.c_int64(v).value
                values[s.name.decode()] = v
            irs = {}
            self.get_irs(dev, C.addressof(einfo), C.addressof(m), None)
            if m.value:
                reps = (ExecIR * m.value)(*[ExecIR(ST_EXEC_IR) for _ in range(m.value)])
                self.get_irs(dev, C.addressof(einfo), C.addressof(m), C.addressof(reps))
                bufs = [C.create_string_buffer(r.size) for r in reps]
                for r, b in zip(reps, bufs):
                    r.data = C.cast(b, P)
                self.get_irs(dev, C.addressof(einfo), C.addressof(m), C.addressof(reps))
                for r, b in zip(reps, bufs):
                    if r.isText:
                        irs[r.name.decode()] = b.raw[:r.size].rstrip(b"\0").decode(
                            errors="replace")
            out.append(dict(name=pr.name.decode(), description=pr.desc.decode(),
                            subgroup=pr.subgroup, stats=values, irs=irs))
        vk.vkDestroyPipeline(dev, pipe, None)
        vk.vkDestroyShaderModule(dev, module, None)
        return out


def summary(executables):
    """The statistics of the executables in one line, and for assembly text the counts of a
    few instructions (spills: local memory loads/stores)."""
    parts = []
    for e in executables:
        parts += [f"{k}={v}" for k, v in e["stats"].items()]
        for name, text in e["irs"].items():
            counts = {op: len(re.findall(rf"\b{op}\b", text))
                      for op in ("LDL", "STL", "LDS", "LDSM", "STS", "LDG", "HMMA", "BAR")}
            parts.append(f"[{name}: {len(text.splitlines())} lines; "
                         + " ".join(f"{k} {v}" for k, v in counts.items() if v) + "]")
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default=probe.DEFAULT)
    ap.add_argument("--layouts", default="nn,tn,nt")
    ap.add_argument("--shape", default="4096,4096,4096", help="M,N,K (decides ALIGNED)")
    ap.add_argument("--shader", default=None, help="another kernel of kernels_glsl, no defines")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = Device()
    print("extensions:", dev.extensions, flush=True)
    if not dev.has_stats:
        print("no VK_KHR_pipeline_executable_properties: pipelines built, no statistics")
    results = []
    if args.shader:
        jobs = [(args.shader, "", compile_file(args.shader, {}))]
    else:
        shape = tuple(int(x) for x in args.shape.split(","))
        jobs = [(cn, lay, probe.spirv_for(probe.CONFIGS[cn], lay, True, True, "f16", shape))
                for cn in args.configs.split(",") for lay in args.layouts.split(",")]
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    for i, (name, layout, spirv) in enumerate(jobs):
        try:
            ex = dev.pipeline_stats(spirv)
        except RuntimeError as e:
            print(f"{name} {layout}: {e}", flush=True)
            continue
        print(f"{name} {layout}: {summary(ex)}", flush=True)
        results.append(dict(config=name, layout=layout,
                            executables=[{k: v for k, v in e.items() if k != "irs"}
                                         for e in ex]))
        if out:
            for e in ex:
                for irname, text in e["irs"].items():
                    fname = re.sub(r"[^A-Za-z0-9]+", "_", f"{i}_{name}_{layout}_{irname}")
                    (out / f"{fname}.txt").write_text(text)
    if out:
        (out / "stats.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
