#!/usr/bin/env bash
# Every GPU path of `perfgate run` in one script, in about seven minutes on one H200:
#   doctor (NVML, clocks, peak table) · CUDA-event timing · the parent-side NVML sampler ·
#   MFU against the vendor peak (H100/H200: bf16 989.4 TFLOP/s) · the bf16 and fp16 knobs ·
#   channels_last · DataLoader workers with pinned memory · no database code on --no-store ·
#   the advisor on the planted inefficient variants of gpt and resnet (which rules fire on CUDA) ·
#   --verify of the bf16-autocast advice by an interleaved A/B re-run · the ddp workload under
#   torchrun with NCCL (one rank per GPU; on a single GPU one rank, and it says so) ·
#   doctor --peak (measured matmul and bandwidth ceilings) · perfgate diagnose · the sequential
#   interleaved A/B of a +5 % canary (the PR verdict's path) · attribution (kernels that moved
#   between two variants) · the work counters of every step · perfgate monitor's NVML series ·
#   fork-server start-up on CUDA.
# Prepare here: bash benchmarks/gpu_wheels.sh; then through the device tool:
#   run(command="set -o pipefail; bash benchmarks/gpu_check.sh 2>&1 | tee $OUT/gpu_check.log",
#       carry=[".whl"], timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 COLUMNS=160
out="${OUT:-$(mktemp -d)}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv || true
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

echo "== doctor"
python3 -m perfgate doctor

status=0
python3 -m perfgate doctor --peak --device cuda --json "$out/ceilings.json" || status=1
echo "== smoke presets on the GPU (CUDA events, NVML sampler)"
python3 -m perfgate run --device cuda --suite smoke --repeats 2 --steps 20 --warmup 3 \
  --no-store --out "$out/gpu-smoke.json" || status=1

echo "== full presets, bf16 (MFU against the peak table), fp16 + GradScaler, channels_last, workers"
python3 -m perfgate run --device cuda -w gpt@full -w resnet@full -w mlp@full --repeats 2 \
  --steps 15 --warmup 5 --knob precision=bf16 --knob resnet.channels_last=true \
  --no-store --out "$out/gpu-bf16.json" || status=1
python3 -m perfgate run --device cuda -w mlp@full --repeats 2 --steps 15 --warmup 5 \
  --knob precision=fp16 --knob optimizer=fused --no-store --out "$out/gpu-fp16.json" || status=1
python3 -m perfgate run --device cuda -w datapipe@full --repeats 2 --steps 15 --warmup 5 \
  --knob num_workers=4 --knob pin_memory=true --no-store --out "$out/gpu-datapipe.json" || status=1

echo "== distributed: the ddp workload under torchrun, NCCL, one rank per GPU"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ "${gpus:-0}" -gt 1 ]; then
  echo "$gpus GPUs: ddp@full (GPT-2 small, bf16) on $gpus ranks over NCCL"
  python3 -m perfgate run --device cuda -w ddp@full --nproc-per-node "$gpus" --repeats 2 \
    --steps 15 --warmup 5 --knob precision=bf16 --no-store --out "$out/gpu-ddp.json" || status=1
else
  # NCCL refuses two ranks on one GPU, so one GPU cannot show multi-rank communication; one
  # NCCL rank still exercises torchrun, the process group on CUDA and the rank merge.
  echo "one GPU: NCCL needs a GPU per rank, so no multi-rank NCCL run; ddp@full on 1 rank"
  python3 -m perfgate run --device cuda -w ddp@full --nproc-per-node 1 --repeats 2 \
    --steps 15 --warmup 5 --knob precision=bf16 --no-store --out "$out/gpu-ddp.json" || status=1
fi

echo "== perfgate diagnose on the GPU: what bounds gpt and resnet (timed run + profiled window)"
python3 -m perfgate diagnose --device cuda -w gpt@full -w resnet@full --repeats 2 --steps 10 \
  --knob precision=bf16 --json "$out/diagnosis.json" --out "$out/diagnose-run.json" || status=1

echo "== perfgate advise on the planted inefficient variants (benchmarks/planted.py)"
read -r -a variant_knobs <<< "$(python3 benchmarks/gpu_check.py --knobs gpt resnet)"
python3 -m perfgate advise --device cuda -w gpt@full -w resnet@full "${variant_knobs[@]}" \
  --warmup 3 --json "$out/advice-inefficient.json" || status=1
if [ -f "$out/advice-inefficient.json" ]; then
  python3 benchmarks/gpu_check.py --advice "$out/advice-inefficient.json" || status=1
fi

echo "== perfgate advise --verify on CUDA: bf16 autocast proven by an interleaved A/B re-run"
# Each repeat is a fresh process (~11 s on an H200 with CUDA start-up): 4 rounds x 2 arms for
# one piece of advice fit in ~2 minutes; two pieces did not fit in 220 s on 2026-11-30.
timeout 170 python3 -m perfgate advise --device cuda -w gpt@full --knob precision=off \
  --knob optimizer=fused --rule bf16-autocast-missing --verify --rounds 4 --steps 10 \
  --warmup 3 --json "$out/advice-verified.json" || status=1

echo "== the PR verdict's path on CUDA: sequential interleaved A/B of mlp against its +5 % canary"
# Also prints each repeat's start-up phases on CUDA (fork server: CUDA is first touched in the
# forked child; spawned: the whole interpreter and import torch again).
timeout 150 python3 benchmarks/gpu_check.py --sequential mlp@full 0.05 12 || status=1
echo "== attribution on CUDA: mlp against mlp in bf16, alternated profiled windows, kernels named"
timeout 120 python3 benchmarks/gpu_check.py --attribution mlp@full precision=bf16 || status=1
echo "== perfgate monitor beside a CUDA training script: step series and NVML at /metrics"
timeout 90 python3 benchmarks/gpu_check.py --monitor || status=1
echo "== start-up per repeat on CUDA, fork server against spawn, interleaved"
timeout 120 python3 benchmarks/startup.py --device cuda --runs 2 --repeats 3 || status=1

echo "== checks on the documents"
python3 benchmarks/gpu_check.py "$out"/gpu-*.json || status=1
exit $status
