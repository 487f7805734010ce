"""torch.compile(mode="reduce-overhead") inference: inductor's compile workers (a subprocess
pool when TORCHINDUCTOR_COMPILE_THREADS > 1) start while the main process runs CUDA. Prints
how many compile-worker processes it saw, then ITERS iterations, each an NVTX range "infer"."""
import os

import torch

ITERS = 20


def compile_workers():
    """Descendant processes whose command line names inductor's compile worker."""
    me = os.getpid()
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        children[int(pid)] = (ppid, cmd)
    found = 0
    for pid, (ppid, cmd) in children.items():
        p = ppid
        while p not in (0, 1, me) and p in children:
            p = children[p][0]
        if p == me and "compile_worker" in cmd:
            found += 1
    return found


model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)
).cuda()
compiled = torch.compile(model, mode="reduce-overhead")
x = torch.randn(64, 256, device="cuda")
with torch.no_grad():
    for _ in range(3):  # warm-up: compile, record the CUDA graph
        compiled(x)
    torch.cuda.synchronize()
    print(f"COMPILE_WORKERS {compile_workers()}", flush=True)
    for _ in range(ITERS):
        torch.cuda.nvtx.range_push("infer")
        compiled(x)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
print(f"pid {os.getpid()} iters {ITERS}", flush=True)
