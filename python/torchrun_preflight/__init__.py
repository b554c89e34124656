"""preflight: checks before a multi-node PyTorch (torchrun + NCCL) job.

The wheel's work is done by the `preflight` binary it installs next to the interpreter's
scripts; this package only finds and runs it (`python -m torchrun_preflight check`).
"""
