//===- rig_main.cpp - End-to-end GPU check of the runtime -----------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Loads the nvcc-built rig kernels with their manifest through the runtime,
// plans batches, uploads plans, runs them (attention + LSE merge) and checks
// the outputs against the float64 CPU reference; then captures run() in a CUDA
// graph, uploads new plans with different lengths, replays the graph and
// checks again. Also checks that bad input is refused before any launch.
// Prints one PASS/FAIL line per check and a summary; exits non-zero on failure.
//
// Usage: attn-rig <rig.cubin> <rig_manifest.json>
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Plan.h"
#include "attn/Runtime/Reference.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using namespace attnrt;

namespace {

constexpr int HQ = 8, HKV = 2, D = 64, BS = 16;
int passes = 0, failures = 0;

void check(bool ok, const char *what, const std::string &detail = "") {
  std::printf("%s  %s%s%s\n", ok ? "PASS" : "FAIL", what, detail.empty() ? "" : ": ",
              detail.c_str());
  (ok ? passes : failures)++;
}

#define CUDA_OK(x)                                                             \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::printf("FAIL  %s: %s\n", #x, cudaGetErrorString(e_));               \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

/// The paged cache: a shuffled pool of blocks shared by all batches.
struct Cache {
  int32_t numBlocks;
  std::vector<float> k, v;
  std::vector<double> kd, vd;
  float *dk = nullptr, *dv = nullptr;
};

/// One batch: lengths, page table, q, and its device copies.
struct Batch {
  std::vector<int32_t> qo{0}, kvIndptr{0}, indices, last, kvLens;
  std::vector<float> q;
  std::vector<double> qd;
  int32_t *dqo, *dkvIndptr, *dindices, *dlast;
  float *dq;
  int32_t size() const { return int32_t(last.size()); }
};

Batch makeBatch(const std::vector<std::pair<int, int>> &lens, const Cache &c,
                uint32_t seed) {
  Batch b;
  std::mt19937 rng(seed);
  std::vector<int32_t> perm(c.numBlocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  int32_t used = 0;
  for (auto [qo, kv] : lens) {
    int32_t nb = (kv + BS - 1) / BS;
    b.qo.push_back(b.qo.back() + qo);
    b.kvIndptr.push_back(b.kvIndptr.back() + nb);
    b.last.push_back(nb ? kv - (nb - 1) * BS : 0);
    b.kvLens.push_back(kv);
    for (int i = 0; i < nb; ++i)
      b.indices.push_back(perm[used++]);
  }
  std::normal_distribution<float> n;
  b.q.resize(size_t(b.qo.back()) * HQ * D);
  for (float &x : b.q)
    x = n(rng);
  b.qd.assign(b.q.begin(), b.q.end());
  auto up = [](auto &vec, auto **dst) {
    size_t bytes = std::max<size_t>(vec.size(), 1) * sizeof(vec[0]);
    CUDA_OK(cudaMalloc(dst, bytes));
    if (!vec.empty())
      CUDA_OK(cudaMemcpy(*dst, vec.data(), vec.size() * sizeof(vec[0]),
                         cudaMemcpyHostToDevice));
  };
  up(b.qo, &b.dqo);
  up(b.kvIndptr, &b.dkvIndptr);
  up(b.indices, &b.dindices);
  up(b.last, &b.dlast);
  up(b.q, &b.dq);
  return b;
}

/// Reference outputs for a batch (float64 on the same float32 inputs).
void reference(const Batch &b, const Cache &c, std::vector<double> *o,
               std::vector<double> *lse) {
  AttentionProblem p;
  p.batch = b.size();
  p.qo_indptr = b.qo.data();
  p.num_qo_heads = HQ;
  p.num_kv_heads = HKV;
  p.head_dim = D;
  p.q = b.qd.data();
  p.kv.block_size = BS;
  p.kv.indptr = b.kvIndptr.data();
  p.kv.indices = b.indices.data();
  p.kv.last_len = b.last.data();
  p.kv.num_blocks = c.numBlocks;
  p.kv.k = c.kd.data();
  p.kv.v = c.vd.data();
  p.variant.causal = 1;
  o->assign(size_t(b.qo.back()) * HQ * D, 0);
  lse->assign(size_t(b.qo.back()) * HQ, 0);
  Status s = referenceAttention(p, o->data(), lse->data());
  if (!s.ok())
    std::printf("reference failed: %s\n", s.message().c_str());
}

/// Compares device outputs with the reference; NaN (the poison) fails.
bool compare(const Batch &b, float *dO, float *dLse, const Cache &c,
             std::string *detail) {
  std::vector<double> ro, rl;
  reference(b, c, &ro, &rl);
  std::vector<float> o(ro.size()), l(rl.size());
  CUDA_OK(cudaMemcpy(o.data(), dO, o.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(l.data(), dLse, l.size() * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0, lseErr = 0;
  bool finite = true;
  for (size_t i = 0; i < o.size(); ++i) {
    if (std::isnan(o[i]))
      finite = false;
    num += (o[i] - ro[i]) * (o[i] - ro[i]);
    den += ro[i] * ro[i];
  }
  for (size_t i = 0; i < l.size(); ++i) {
    if (std::isnan(l[i]) || (std::isinf(rl[i]) != std::isinf(l[i])))
      finite = false;
    else if (!std::isinf(rl[i]))
      lseErr = std::max(lseErr, std::abs(l[i] - rl[i]));
  }
  double rel = std::sqrt(num / std::max(den, 1e-300));
  char buf[160];
  std::snprintf(buf, sizeof(buf), "rows=%d rel_err=%.2e max_lse_err=%.2e%s",
                b.qo.back() * HQ, rel, lseErr, finite ? "" : " NON-FINITE/POISON");
  *detail = buf;
  return finite && rel < 1e-5 && lseErr < 1e-4;
}

std::vector<KernelArg> argsFor(const Batch &b, const Cache &c, float *dO,
                               float *dLse) {
  return {KernelArg::pointer("q", uint64_t(b.dq)),
          KernelArg::pointer("k_cache", uint64_t(c.dk)),
          KernelArg::pointer("v_cache", uint64_t(c.dv)),
          KernelArg::pointer("o", uint64_t(dO)),
          KernelArg::pointer("lse", uint64_t(dLse)),
          KernelArg::pointer("qo_indptr", uint64_t(b.dqo)),
          KernelArg::pointer("kv_indptr", uint64_t(b.dkvIndptr)),
          KernelArg::pointer("kv_indices", uint64_t(b.dindices)),
          KernelArg::pointer("kv_last_len", uint64_t(b.dlast)),
          KernelArg::float32("sm_scale", 1.0f / std::sqrt(float(D))),
          KernelArg::int32("causal", 1)};
}

void poison(float *dO, float *dLse, size_t rows) {
  CUDA_OK(cudaMemset(dO, 0xFF, rows * D * 4)); // NaN
  CUDA_OK(cudaMemset(dLse, 0xFF, rows * 4));
}

PlanInputs inputsOf(const Batch &b, int32_t numBlocks) {
  PlanInputs in;
  in.batch = b.size();
  in.qo_indptr = b.qo.data();
  in.kv_indptr = b.kvIndptr.data();
  in.kv_last_len = b.last.data();
  in.kv_indices = b.indices.data();
  in.num_cache_blocks = numBlocks;
  return in;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::printf("usage: %s rig.cubin rig_manifest.json\n", argv[0]);
    return 2;
  }
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(nullptr)); // make the primary context current
  DeviceInfo dev;
  Status s = currentDevice(&dev);
  check(s.ok(), "currentDevice", s.ok() ? dev.name + " sm_" + std::to_string(dev.compute_capability) + " SMs=" + std::to_string(dev.num_sms) : s.message());
  if (!s.ok())
    return 1;
  std::unique_ptr<Module> mod;
  s = Module::loadFiles(argv[1], argv[2], &mod);
  check(s.ok(), "Module::loadFiles (cubin + manifest)", s.message());
  if (!s.ok())
    return 1;

  // A cache big enough for the largest batch.
  Cache cache;
  cache.numBlocks = 12000;
  std::mt19937 rng(1);
  std::normal_distribution<float> n;
  cache.k.resize(size_t(cache.numBlocks) * BS * HKV * D);
  cache.v.resize(cache.k.size());
  for (float &x : cache.k) x = n(rng);
  for (float &x : cache.v) x = n(rng);
  cache.kd.assign(cache.k.begin(), cache.k.end());
  cache.vd.assign(cache.v.begin(), cache.v.end());
  CUDA_OK(cudaMalloc(&cache.dk, cache.k.size() * 4));
  CUDA_OK(cudaMalloc(&cache.dv, cache.v.size() * 4));
  CUDA_OK(cudaMemcpy(cache.dk, cache.k.data(), cache.k.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(cache.dv, cache.v.data(), cache.v.size() * 4, cudaMemcpyHostToDevice));

  // Batches: skewed decode (D3-like), mixed prefill/decode with empty requests,
  // and one long request that must be split across every CTA.
  std::vector<std::pair<int, int>> skewed(64, {1, 512});
  for (int i : {4, 17, 33, 58}) skewed[i].second = 32768 / 8;
  std::vector<std::pair<int, int>> mixed = {{7, 300}, {0, 50}, {1, 9000}, {3, 0},
                                            {12, 12}, {1, 1}, {5, 2000}, {2, 700}};
  std::vector<std::pair<int, int>> longOne = {{1, 131072}};
  std::vector<Batch> batches = {makeBatch(skewed, cache, 2), makeBatch(mixed, cache, 3),
                                makeBatch(longOne, cache, 4)};
  const char *names[] = {"skewed decode (64 req, 4 long)", "mixed prefill/decode + empty",
                         "one request of 131072 tokens"};

  PlanConfig cfg;
  cfg.num_qo_heads = HQ;
  cfg.num_kv_heads = HKV;
  cfg.head_dim = D;
  cfg.block_size = BS;
  cfg.causal = 1;
  cfg.num_sms = dev.num_sms;
  cfg.ctas_per_sm = 1;
  cfg.max_batch = 64;
  cfg.max_total_q_rows = 256;
  cfg.num_candidates = 1;
  cfg.candidates[0] = mod->kernel("attn_rig_attention")->candidate();
  s = checkKernelMatchesPlan(*mod->kernel("attn_rig_attention"), cfg, 0);
  check(s.ok(), "checkKernelMatchesPlan", s.message());

  size_t maxRows = 256 * HQ;
  float *dO, *dLse;
  CUDA_OK(cudaMalloc(&dO, maxRows * D * 4));
  CUDA_OK(cudaMalloc(&dLse, maxRows * 4));
  std::vector<int32_t> host;
  void *dws = nullptr;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint64_t st = uint64_t(stream);

  // Graph mode binds fixed serving buffers (sized by the maxima) at capture;
  // each step copies its batch into them, plans, uploads, and replays.
  Batch fixed;
  CUDA_OK(cudaMalloc(&fixed.dq, maxRows * D * 4));
  CUDA_OK(cudaMalloc(&fixed.dqo, 65 * 4));
  CUDA_OK(cudaMalloc(&fixed.dkvIndptr, 65 * 4));
  CUDA_OK(cudaMalloc(&fixed.dindices, size_t(cache.numBlocks) * 4));
  CUDA_OK(cudaMalloc(&fixed.dlast, 64 * 4));
  auto stage = [&](const Batch &b) {
    CUDA_OK(cudaMemcpyAsync(fixed.dq, b.q.data(), b.q.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(fixed.dqo, b.qo.data(), b.qo.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(fixed.dkvIndptr, b.kvIndptr.data(), b.kvIndptr.size() * 4, cudaMemcpyHostToDevice, stream));
    if (!b.indices.empty())
      CUDA_OK(cudaMemcpyAsync(fixed.dindices, b.indices.data(), b.indices.size() * 4, cudaMemcpyHostToDevice, stream));
    if (!b.last.empty())
      CUDA_OK(cudaMemcpyAsync(fixed.dlast, b.last.data(), b.last.size() * 4, cudaMemcpyHostToDevice, stream));
  };

  for (int mode = 0; mode < 2; ++mode) {
    cfg.graph_mode = mode;
    host.assign(planHostWorkspaceBytes(cfg) / 4, 0);
    int32_t *pinned;
    CUDA_OK(cudaMallocHost(&pinned, host.size() * 4));
    if (dws) CUDA_OK(cudaFree(dws));
    CUDA_OK(cudaMalloc(&dws, planDeviceWorkspaceBytes(cfg)));
    uint64_t ws = uint64_t(dws);
    const char *m = mode ? "[graph] " : "[eager] ";
    cudaGraphExec_t exec = nullptr;
    // Graph mode replays batches in the order 0,1,2,0: every replay after the
    // first follows a new plan with different lengths.
    std::vector<size_t> order = mode ? std::vector<size_t>{0, 1, 2, 0}
                                     : std::vector<size_t>{0, 1, 2};
    for (size_t i : order) {
      Batch &b = batches[i];
      auto t0 = std::chrono::steady_clock::now();
      s = plan(cfg, inputsOf(b, cache.numBlocks), pinned, host.size() * 4);
      double us = std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - t0).count();
      PlanView v{pinned};
      std::string what = std::string(m) + "plan " + names[i];
      char timing[64];
      std::snprintf(timing, sizeof(timing), " plan_us=%.1f", us);
      check(s.ok(), what.c_str(),
            s.ok() ? "ctas=" + std::to_string(v.numCtas()) + " items=" +
                         std::to_string(v.numItems()) + " merges=" +
                         std::to_string(v.numMergeUnits()) + timing
                   : s.message());
      if (!s.ok())
        continue;
      poison(dO, dLse, maxRows);
      s = uploadPlan(v, ws, st);
      check(s.ok(), (std::string(m) + "uploadPlan").c_str(), s.message());
      if (mode == 0) {
        std::vector<KernelArg> args = argsFor(b, cache, dO, dLse);
        s = run(*mod, "attn_rig_attention", "attn_rig_merge", v, ws, args.data(),
                int32_t(args.size()), st);
        check(s.ok(), (std::string(m) + "run " + names[i]).c_str(), s.message());
      } else {
        stage(b);
        if (!exec) {
          std::vector<KernelArg> args = argsFor(fixed, cache, dO, dLse);
          cudaGraph_t graph;
          CUDA_OK(cudaStreamSynchronize(stream));
          CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
          s = run(*mod, "attn_rig_attention", "attn_rig_merge", v, ws, args.data(),
                  int32_t(args.size()), st);
          cudaError_t e = cudaStreamEndCapture(stream, &graph);
          check(s.ok() && e == cudaSuccess, "[graph] capture run() in a CUDA graph",
                s.ok() ? cudaGetErrorString(e) : s.message());
          CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
          size_t nodes = 0;
          CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
          check(nodes == 2, "[graph] graph has attention + merge nodes",
                "nodes=" + std::to_string(nodes));
        }
        CUDA_OK(cudaGraphLaunch(exec, stream));
      }
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(cudaGetLastError());
      std::string detail;
      bool ok = compare(b, dO, dLse, cache, &detail);
      check(ok, (std::string(m) + (mode ? "graph replay: " : "result: ") + names[i])
                    .c_str(), detail);
    }
    if (exec) CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaFreeHost(pinned));
  }

  // Bad input is refused before any launch, with a message naming it.
  {
    cfg.graph_mode = 0;
    host.assign(planHostWorkspaceBytes(cfg) / 4, 0);
    Batch &b = batches[1];
    s = plan(cfg, inputsOf(b, cache.numBlocks), host.data(), host.size() * 4);
    PlanView v{host.data()};
    std::vector<KernelArg> args = argsFor(b, cache, dO, dLse);
    args.pop_back(); // drop "causal"
    s = run(*mod, "attn_rig_attention", "attn_rig_merge", v, uint64_t(dws), args.data(),
            int32_t(args.size()), st);
    check(s.code() == StatusCode::ManifestMismatch &&
              s.message().find("causal") != std::string::npos,
          "run refuses an unbound kernel argument", s.message());
    args = argsFor(b, cache, dO, dLse);
    args.back() = KernelArg::float32("causal", 1.0f);
    s = run(*mod, "attn_rig_attention", "attn_rig_merge", v, uint64_t(dws), args.data(),
            int32_t(args.size()), st);
    check(s.code() == StatusCode::ManifestMismatch, "run refuses a mistyped argument",
          s.message());
    s = run(*mod, "attn_rig_merge", "", v, uint64_t(dws), args.data(),
            int32_t(args.size()), st);
    check(s.code() == StatusCode::ManifestMismatch, "run refuses a merge kernel as attention",
          s.message());
    std::string badManifest = R"({"attn_manifest_version":1,"arch":"sm_90","kernels":[
      {"name":"attn_rig_missing","role":"merge","threads":128,"shared_bytes":0,
       "dtype":"f32","head_dim":64,"num_qo_heads":8,"num_kv_heads":2,
       "args":[{"name":"plan","kind":"ptr"},{"name":"merge_indptr","kind":"ptr"},
       {"name":"merge_units","kind":"ptr"},{"name":"partial_o","kind":"ptr"},
       {"name":"partial_lse","kind":"ptr"}]}]})";
    FILE *f = std::fopen(argv[1], "rb");
    std::vector<char> image;
    if (f) {
      char buf[4096];
      size_t got;
      while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
        image.insert(image.end(), buf, buf + got);
      std::fclose(f);
    }
    std::unique_ptr<Module> bad;
    s = Module::load(image.data(), image.size(), badManifest, &bad);
    check(s.code() == StatusCode::ManifestMismatch,
          "load refuses a manifest naming a kernel the cubin lacks", s.message());
    std::string future = badManifest;
    future.replace(future.find("sm_90"), 5, "sm_99");
    s = Module::load(image.data(), image.size(), future, &bad);
    check(s.code() == StatusCode::ManifestMismatch,
          "load refuses a manifest for a newer arch", s.message());
    CUDA_OK(cudaStreamSynchronize(stream));
  }

  std::printf("SUMMARY %d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
