"""Steps until a signal ends the process. argv[1]:
  term: installs its own SIGTERM handler after CUDA start-up (after kp's), which prints
        APP_HANDLER SIGTERM and ends the process by the default action (status 143);
  int:  keeps Python's own SIGINT handler (installed before kp): KeyboardInterrupt, status 130.
Prints "STEP n" after each completed step (an NVTX range "step" of K multiplies)."""
import os
import signal
import sys
import time

import torch

K = 10
x = torch.ones(1 << 16, device="cuda")
torch.cuda.synchronize()
if sys.argv[1] == "term":

    def on_term(signo, frame):
        print("APP_HANDLER SIGTERM", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
print(f"PID {os.getpid()}", flush=True)
step = 0
while step < 600:
    torch.cuda.nvtx.range_push("step")
    for _ in range(K):
        x.mul_(1.0001)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    step += 1
    print(f"STEP {step}", flush=True)
    time.sleep(0.05)
print("NOT SIGNALLED", flush=True)
