// The table every kernel of minimm walks, on the CPU and on the GPU alike: one row per tensor
// (where to write, where to read, how many elements, what to do) and a list of chunks, each a
// piece of one row. The CPU runs one at::parallel_for over the chunks; the CUDA kernels map their
// blocks onto them (multi_tensor_apply.cuh). Both devices use the same chunking, so the CPU
// tests exercise the index math the GPU relies on.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace minimm {

// Every chunk covers kChunkBytes of the wider side of its row (the last chunk of a row may be
// shorter): on a GPU one block's work per chunk, 256 threads x 4 vectors x 16 bytes.
constexpr int64_t kChunkBytes = 16384;
// Every tensor starts at a multiple of kAlignBytes in a pack's flat tensor, so that each slice
// is aligned for a 16-byte vector load.
constexpr int64_t kAlignBytes = 16;
C10_HOST_DEVICE inline int64_t align_up(int64_t n, int64_t quantum) { return (n + quantum - 1) / quantum * quantum; }

// What a row does on one call; the CUDA kernel switches on it, the CPU keeps a function per row.
enum Mode : int32_t {
  kDecide = 0,             // floating pair of an averaged model: copy, average or skip, from the counter
  kCopyUnlessSkipped = 1,  // integer pair of an averaged model: copied on copying and averaging calls
  kCopyAlways = 2,         // mirrored pair (buffers), or pack/unpack
};

struct Row {
  void* dst;
  const void* src;
  int64_t numel;
  int32_t kernel;  // which element loop (ema.h, pack.h numbers); on a GPU also which kernel runs it
  int32_t mode;    // Mode
};

struct Chunk {
  int64_t first;  // first element of the row
  int32_t row;
  int32_t n;      // elements
};

// On a GPU, one launch per kind of row present (a dtype pair, a byte copy...): each kernel is
// compiled for one kind only, which keeps it small (registers, occupancy). upload() reorders the
// chunks so that those of one kind sit together and lists them here.
struct Segment {
  int32_t kind;
  int64_t first, count;   // chunks [first, first + count) of the table
  unsigned int blocks;    // grid size: enough to fill the GPU, no more than `count`
};

// What one call runs: the rows, their chunks, and on a GPU both copied once into device memory,
// so that a launch passes one pointer.
struct Table {
  std::vector<Row> rows;
  std::vector<Chunk> chunks;
  // EMA plans of several averaged copies: each chunk stands for `targets` consecutive rows from
  // chunk.row on (one source, one copy each), all of one kind; 1 everywhere else.
  int32_t targets = 1;
  int64_t units = 0;                 // elements (bytes for byte rows) of all rows
  std::vector<Segment> segments;     // GPU only, set by upload()
  at::Tensor device;                 // undefined until the first CUDA run after a build
  std::vector<c10::Stream> streams;  // GPU only: the streams `device` is used on (see use_on())
};

// Reorders the chunks so that each kind's are contiguous, in row order (a counting sort over at
// most `kinds` kinds), and lists one segment per kind present. `kind_of` maps a Row to its kind.
template <typename KindOf>
void group_by_kind(Table& table, int32_t kinds, KindOf kind_of) {
  std::vector<int64_t> start(kinds + 1, 0);
  for (const Chunk& c : table.chunks) ++start[kind_of(table.rows[c.row]) + 1];
  for (int32_t k = 0; k < kinds; ++k) start[k + 1] += start[k];
  std::vector<Chunk> sorted(table.chunks.size());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (const Chunk& c : table.chunks) sorted[next[kind_of(table.rows[c.row])]++] = c;
  table.chunks = std::move(sorted);
  table.segments.clear();
  for (int32_t k = 0; k < kinds; ++k)
    if (start[k + 1] > start[k]) table.segments.push_back({k, start[k], start[k + 1] - start[k], 0});
}

// Adds `storage` to `kept` unless it is there already.
inline void keep_alive(std::vector<c10::Storage>& kept, const c10::Storage& storage) {
  for (const c10::Storage& k : kept)
    if (k.is_alias_of(storage)) return;
  kept.push_back(storage);
}

// CUDA graphs: a captured launch replays the table's raw pointers and runs no host code, so the
// memory it points into must outlive the graph. A plan (EMAPlan, PackPlan) keeps it here: what
// the table now in use points into once a run of it was captured, and after a rebuild what the
// table before it pointed into, for a graph of that one still replayed, until a run of the new
// table is captured (the rebuild's warning asks for that). Rebuilding and capturing again and
// again so keeps at most two tables' memory.
struct CapturedMemory {
  std::vector<c10::Storage> current, previous;
  bool captured = false;  // whether a run of the current table was captured

  // At a captured run of the table built over `table_storages`, which also uses `extra` (the
  // device table, a counter).
  void on_capture(const std::vector<c10::Storage>& table_storages,
                  std::initializer_list<c10::Storage> extra) {
    if (!captured) {
      previous.clear();
      current = table_storages;
      captured = true;
    }
    for (const c10::Storage& storage : extra) keep_alive(current, storage);
  }

  // At a rebuild; returns whether the old table was captured (the caller then warns).
  bool on_rebuild() {
    if (!captured) return false;
    previous = std::move(current);
    current.clear();
    captured = false;
    return true;
  }
};

// Before a rebuild lets go of the storages the old table pointed into: on a GPU, each is recorded
// as in use on every stream the table ran on (use_on), so that the caching allocator does not hand
// its memory out while a step queued on one of them still reads or writes it.
inline void record_streams(const std::vector<c10::Storage>& storages,
                           const std::vector<c10::Stream>& streams) {
  if (streams.empty()) return;
  for (const c10::Storage& storage : storages) {
    if (storage.device_type() != c10::DeviceType::CUDA) continue;
    at::Tensor bytes = at::empty({0}, at::dtype(at::kByte).device(storage.device()));
    bytes.set_(storage);
    for (const c10::Stream& stream : streams) bytes.record_stream(stream);
  }
}

// Appends the chunks of row `row` of `numel` elements, each `elem_bytes` wide (the wider side).
inline void add_chunks(Table& table, int32_t row, int64_t numel, int64_t elem_bytes) {
  const int64_t per_chunk = kChunkBytes / elem_bytes;
  table.units += numel;
  for (int64_t first = 0; first < numel; first += per_chunk)
    table.chunks.push_back({first, row, static_cast<int32_t>(std::min(per_chunk, numel - first))});
}

}  // namespace minimm
