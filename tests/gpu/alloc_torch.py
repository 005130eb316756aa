"""tests/shim_gpu.sh's PyTorch client: a tensor of N GiB on cuda:0.

Prints "OK <bytes>" or "OOM <first line of the error>", holds the tensor S
seconds, and exits 0 (OK), 2 (out of memory), 1 (anything else), or 77
when PyTorch or a CUDA device is missing. PyTorch's caching allocator calls
cudaMalloc through libcudart.so, and checks cudaGetLastError after its
kernels: the memset below would report an error the shim left behind.

Usage: python3 alloc_torch.py N_GIB [S]
"""
import sys
import time

try:
    import torch
except ImportError:
    print("SKIP no torch module", file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP torch sees no CUDA device", file=sys.stderr)
    sys.exit(77)

gib = float(sys.argv[1])
hold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
torch.cuda.init()
free, total = torch.cuda.mem_get_info(0)
print(f"alloc_torch: {free >> 20} MiB free of {total >> 20} MiB; asking {gib} GiB", file=sys.stderr)
try:
    x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda:0")
    x.fill_(0xA5)
    torch.cuda.synchronize()
except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    if "out of memory" in str(e).lower():
        print("OOM", first)
        sys.exit(2)
    print("ERROR", first)
    sys.exit(1)
print("OK", x.numel(), flush=True)
time.sleep(hold)
sys.exit(0)
