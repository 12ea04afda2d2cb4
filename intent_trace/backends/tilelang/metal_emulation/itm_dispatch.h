// itm_dispatch.h (part of itm_metal.h): the scheduler of a threadgroup's fibers, the dispatch over the grid,
// the position builtins and the reports.
#pragma once

namespace itm {
// --- the dispatch -----------------------------------------------------------------------------------------------
static void trampoline() {
  D->body();
  D->cur->state = DONE;  // uc_link returns to the scheduler
}

static inline uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline std::vector<uint> order(uint n, uint64_t& seed) {
  std::vector<uint> v(n);
  for (uint i = 0; i < n; ++i) v[i] = i;
  if (seed != 0)
    for (uint i = n; i > 1; --i) std::swap(v[i - 1], v[splitmix(seed) % i]);
  return v;
}

// Release the lanes of one simdgroup waiting at one collective, once no lane of it can still arrive.
static bool release_collective() {
  for (size_t sg = 0; sg < D->simd.size(); ++sg) {
    uint lo = (uint)sg * SIMD_WIDTH, hi = lo + SIMD_WIDTH < D->n ? lo + SIMD_WIDTH : D->n;
    int op = 0;
    for (uint i = lo; i < hi && op == 0; ++i)
      if (D->th[i].state == AT_SIMD) op = D->th[i].op;
    if (op == 0) continue;
    Simd& s = D->simd[sg];
    int g = s.gen & 1, flags = -1;
    s.mask[g] = 0;
    for (uint i = lo; i < hi; ++i) {
      Thread& t = D->th[i];
      if (t.state != AT_SIMD || t.op != op) continue;
      s.mask[g] |= 1u << (i - lo);
      memcpy(s.out[g][i - lo], s.in[i - lo], 16);
      t.state = RUNNING;
      t.release_gen = s.gen;
      flags &= t.flags;
    }
    if (op == OP_SIMD_BARRIER) {
      if (flags & (int)metal::mem_flags::mem_device) ++D->sepoch[DEVICE][sg];
      if (flags & (int)metal::mem_flags::mem_threadgroup) ++D->sepoch[THREADGROUP][sg];
    }
    ++s.gen;
    return true;
  }
  return false;
}

// Release the threadgroup barrier once every thread waits at it; anything else is a divergence Metal forbids.
static bool release_barrier() {
  int flags = -1, line = -1, done = -1, other = -1;
  for (uint i = 0; i < D->n; ++i) {
    Thread& t = D->th[i];
    if (t.state == DONE) done = done < 0 ? (int)i : done;
    else if (line < 0) line = t.line, flags &= t.flags;
    else if (t.line != line) other = (int)i;
    else flags &= t.flags;
  }
  if (line < 0) return false;
  char s[400];
  if (done >= 0 || other >= 0) {
    int waiting = -1;
    for (uint i = 0; i < D->n && waiting < 0; ++i)
      if (D->th[i].state == AT_BARRIER) waiting = (int)i;
    if (done >= 0)
      snprintf(s, sizeof s, "threadgroup_barrier at line %d is not reached by every thread: %s returned while %s "
               "waits there", D->th[waiting].line, who(D->glin, done).c_str(), who(D->glin, waiting).c_str());
    else
      snprintf(s, sizeof s, "threads of one threadgroup wait at different barriers: %s at line %d, %s at line %d",
               who(D->glin, waiting).c_str(), D->th[waiting].line, who(D->glin, other).c_str(), D->th[other].line);
    report(s);
    D->abort_group = true;
    return false;
  }
  if (flags & (int)metal::mem_flags::mem_device) ++D->epoch[DEVICE];
  if (flags & (int)metal::mem_flags::mem_threadgroup) ++D->epoch[THREADGROUP];
  for (uint i = 0; i < D->n; ++i) D->th[i].state = RUNNING;
  return true;
}

static void run_group(const std::vector<uint>& thread_order) {
  for (uint i = 0; i < D->n; ++i) {
    Thread& t = D->th[i];
    t.state = RUNNING;
    t.release_gen = 0;
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = t.stack;
    t.ctx.uc_stack.ss_size = D->stack_size;
    t.ctx.uc_link = &D->sched;
    makecontext(&t.ctx, trampoline, 0);
  }
  for (;;) {
    for (uint i : thread_order) {
      Thread& t = D->th[i];
      if (t.state != RUNNING) continue;
      D->cur = &t;
      swapcontext(&D->sched, &t.ctx);
    }
    bool all_done = true;
    for (uint i = 0; i < D->n; ++i) all_done = all_done && D->th[i].state == DONE;
    if (all_done || D->abort_group) return;
    if (!release_collective() && !release_barrier()) return;
  }
}

// Run the kernel body once per thread of every threadgroup; the reports say what went wrong (none: success).
static long dispatch(void (*body)(), Dispatch& d, uint3 grid, uint3 threads, std::vector<Region>&& buffers,
                     uint64_t seed) {
  D = &d;
  d.grid = grid;
  d.threads = threads;
  d.n = threads.x * threads.y * threads.z;
  d.body = body;
  d.buffers = std::move(buffers);
  uint groups = grid.x * grid.y * grid.z;
  d.track = (uint64_t)groups * d.n > 1;  // one thread alone cannot race
  d.stack_size = d.n <= 32 ? (8u << 20) : (1u << 20);
  d.th.resize(d.n);
  d.simd.resize((d.n + SIMD_WIDTH - 1) / SIMD_WIDTH);
  for (uint i = 0; i < d.n; ++i) {
    Thread& t = d.th[i];
    t.lin = i;
    t.pos = uint3(i % threads.x, i / threads.x % threads.y, i / (threads.x * threads.y));
    // a fiber's stack, with an inaccessible page below it: an overflow faults instead of writing past it
    void* m = mmap(nullptr, d.stack_size + GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED || mprotect(m, GUARD, PROT_NONE) != 0) {
      report("the emulator could not map a thread's stack");
      if (m != MAP_FAILED) munmap(m, d.stack_size + GUARD);
      for (uint j = 0; j < i; ++j) munmap(d.th[j].stack - GUARD, d.stack_size + GUARD);
      D = nullptr;
      return d.nreports;
    }
    t.stack = (char*)m + GUARD;
  }
  std::vector<uint> thread_order = order(d.n, seed);
  for (uint g : order(groups, seed)) {
    d.glin = (int)g;
    d.gpos = uint3(g % grid.x, g / grid.x % grid.y, g / (grid.x * grid.y));
    d.epoch[0] = d.epoch[1] = 0;
    for (int s = 0; s < 2; ++s) d.sepoch[s].assign(d.simd.size(), 0);
    d.abort_group = false;
    run_group(thread_order);
    for (auto& s : d.shared) {
      delete[] s.second->base;
      delete s.second;
    }
    d.shared.clear();
    if (d.nreports >= MAX_REPORTS) break;
  }
  for (Thread& t : d.th) munmap(t.stack - GUARD, d.stack_size + GUARD);
  D = nullptr;
  return d.nreports;
}

// The builtin position values, converted to the type the kernel declares them with.
template <typename T> struct builtin {
  static T from(uint3 v) { return (T)v.x; }
};
template <typename U> struct builtin<metal::vec<U, 3>> {
  static metal::vec<U, 3> from(uint3 v) { return metal::vec<U, 3>((U)v.x, (U)v.y, (U)v.z); }
};
template <typename U> struct builtin<metal::vec<U, 2>> {
  static metal::vec<U, 2> from(uint3 v) { return metal::vec<U, 2>((U)v.x, (U)v.y); }
};
static inline uint3 position(const char* what) {
  const Thread& t = *D->cur;
  uint3 g = D->gpos, tg = D->threads, n = D->grid;
  if (!strcmp(what, "thread_position_in_threadgroup")) return t.pos;
  if (!strcmp(what, "threadgroup_position_in_grid")) return g;
  if (!strcmp(what, "threadgroups_per_grid")) return n;
  if (!strcmp(what, "threads_per_threadgroup")) return tg;
  if (!strcmp(what, "thread_position_in_grid"))
    return uint3(g.x * tg.x + t.pos.x, g.y * tg.y + t.pos.y, g.z * tg.z + t.pos.z);
  if (!strcmp(what, "threads_per_grid")) return uint3(n.x * tg.x, n.y * tg.y, n.z * tg.z);
  if (!strcmp(what, "thread_index_in_threadgroup")) return uint3(t.lin, 0, 0);
  if (!strcmp(what, "simdgroup_index_in_threadgroup")) return uint3(t.lin / SIMD_WIDTH, 0, 0);
  if (!strcmp(what, "thread_index_in_simdgroup")) return uint3(t.lin % SIMD_WIDTH, 0, 0);
  if (!strcmp(what, "threads_per_simdgroup")) return uint3(SIMD_WIDTH, 0, 0);
  if (!strcmp(what, "simdgroups_per_threadgroup")) return uint3((D->n + SIMD_WIDTH - 1) / SIMD_WIDTH, 0, 0);
  return uint3(0, 0, 0);
}
template <typename T> ptr<T> buffer(int k) {
  Region& r = D->buffers[k];
  r.elem = sizeof(T);
  return ptr<T>((T*)r.base, &r, r.bytes / (long)sizeof(T), 0, 0);
}

// The report text, the reports separated by newlines (the Python driver reads it after a dispatch).
static inline long copy_reports(const Dispatch& d, char* out, long size) {
  std::string all;
  for (const std::string& r : d.reports) all += r + "\n";
  if (d.nreports > (long)d.reports.size())
    all += "... and " + std::to_string(d.nreports - (long)d.reports.size()) + " more\n";
  long n = (long)all.size() < size - 1 ? (long)all.size() : size - 1;
  memcpy(out, all.data(), n);
  out[n] = 0;
  return n;
}
}  // namespace itm
