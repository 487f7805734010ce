# require_gpu_torch.sh: sourced by the PyTorch GPU runners (run_process_tree_tests.sh,
# run_capture_tests.sh). require_gpu_torch prints the GPUs and the PyTorch version, or one
# "SKIP: ..." line and returns 1 when there is no usable GPU ($NVIDIA_SMI -L) or no PyTorch with
# CUDA ($PYTHON).
require_gpu_torch() {
  local gpus torch
  if ! gpus=$("$NVIDIA_SMI" -L 2>&1) || [[ -z "$gpus" ]]; then
    echo "SKIP: no GPU ($NVIDIA_SMI -L: ${gpus:-no output})"
    return 1
  fi
  echo "$gpus"
  if ! torch=$("$PYTHON" -c 'import torch; assert torch.cuda.is_available(); print(torch.__version__, torch.version.cuda)' 2>&1); then
    echo "SKIP: no PyTorch with CUDA ($PYTHON: ${torch##*$'\n'})"
    return 1
  fi
  echo "== python $("$PYTHON" -V 2>&1), torch $torch"
}
