// Issue #36: does node-llama-cpp's prebuilt binary lose speed by computing each graph on a thread pool
// that ggml creates and joins per decode (no OpenMP, no pool attached)? Decodes one token per sequence
// with the prebuilt libraries themselves, alternating blocks of 20 steps with and without a persistent
// pool attached (llama_attach_threadpool), and prints the mean step of each and the per-block ratios.
// C++ because node-llama-cpp exposes no thread pool; built against the bundled llama.cpp headers:
//
//   B=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64; S=~/.cache/lectern-llama/src
//   g++ -O2 -std=c++17 bench/native/threadpool.cpp -I$S/include -I$S/ggml/include \
//     $B/libllama.v0.4.0.so $B/libggml.v0.4.0.so $B/libggml-base.so -Wl,-rpath,$B -o /tmp/threadpool
//   /tmp/threadpool $B MODEL.gguf THREADS SEQUENCES
//
// (S is the clone bench/lib/llama-cpp-tools.ts makes; MODEL the 0.5B-shaped Q4_K_M model it writes.)
#include "llama.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
int main(int argc, char** argv) {
  const char* bins = argv[1]; const char* model_path = argv[2];
  int threads = argc > 3 ? atoi(argv[3]) : 2;
  int seqs = argc > 4 ? atoi(argv[4]) : 1;
  ggml_backend_load_all_from_path(bins);
  llama_backend_init();
  auto mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path, mp);
  auto cp = llama_context_default_params();
  cp.n_ctx = 8192; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_seq_max = 8; cp.n_threads = threads; cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED; cp.kv_unified = false;
  llama_context* ctx = llama_init_from_model(model, cp);
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
  auto tp_new = (decltype(ggml_threadpool_new)*)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
  auto tp_params = ggml_threadpool_params_default(threads);
  ggml_threadpool* tp = tp_new(&tp_params);
  printf("system: %s\n", llama_print_system_info());
  int pos = 0;
  auto run = [&](int steps) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; i++) {
      llama_batch b = llama_batch_init(seqs, 0, 1);
      for (int s = 0; s < seqs; s++) { b.token[s] = 100 + (i % 50); b.pos[s] = pos; b.n_seq_id[s] = 1; b.seq_id[s][0] = s; b.logits[s] = 1; }
      b.n_tokens = seqs;
      if (llama_decode(ctx, b)) { printf("decode failed\n"); exit(1); }
      llama_batch_free(b);
      pos++;
      if (pos >= 900) { for (int s = 0; s < seqs; s++) llama_memory_seq_rm(llama_get_memory(ctx), s, -1, -1); pos = 0; }
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
  };
  run(20);
  std::vector<double> ratios; double sa = 0, sb = 0;
  for (int round = 0; round < 60; round++) {
    double a, b;
    if (round % 2 == 0) { llama_detach_threadpool(ctx); a = run(20); llama_attach_threadpool(ctx, tp, tp); b = run(20); }
    else { llama_attach_threadpool(ctx, tp, tp); b = run(20); llama_detach_threadpool(ctx); a = run(20); }
    ratios.push_back(a / b); sa += a; sb += b;
  }
  std::sort(ratios.begin(), ratios.end());
  printf("seqs %d: disposable %.2f ms/step, attached %.2f ms/step; per-block ratio p25 %.3f median %.3f p75 %.3f\n", seqs, sa / 60, sb / 60, ratios[15], ratios[30], ratios[45]);
  return 0;
}
