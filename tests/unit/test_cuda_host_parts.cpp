// The host-side parts of the CUDA backend, checked where no GPU is: the memory
// pool's bookkeeping (with a counting fake driver) and the row-major to
// column-major GEMM mapping cuBLAS is called with (against cblas in column-major
// mode, which follows the same convention).
#include <boost/test/unit_test.hpp>
#include <cblas.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/core/gemm_layout.hpp"
#include "engine/core/memory_pool.hpp"
#include "kernels/cpu/gemm.hpp"

BOOST_AUTO_TEST_SUITE(test_cuda_host_parts)  // ctest's unit.test_cuda_host_parts (tests/CMakeLists.txt)

using namespace tandem;

namespace {

struct FakeDriver {
  size_t allocations = 0, frees = 0, budget = ~size_t(0), held = 0;
  std::set<void*> live;
  MemoryPool pool() {
    return MemoryPool(
        [this](size_t bytes) -> void* {
          if (held + bytes > budget) return nullptr;
          void* p = std::malloc(bytes);
          held += bytes;
          ++allocations;
          live.insert(p);
          sizes[p] = bytes;
          return p;
        },
        [this](void* p) {
          held -= sizes[p];
          live.erase(p);
          ++frees;
          std::free(p);
        });
  }
  std::map<void*, size_t> sizes;
};

}  // namespace

BOOST_AUTO_TEST_CASE(pool_reuses_freed_blocks_of_the_same_class) {
  FakeDriver driver;
  {
    MemoryPool pool = driver.pool();
    void* a = pool.allocate(1000);
    BOOST_TEST(pool.bytes_in_use() == MemoryPool::size_class(1000));
    pool.deallocate(a);
    BOOST_TEST(pool.bytes_in_use() == 0u);
    BOOST_TEST(pool.bytes_cached() == MemoryPool::size_class(1000));
    // A slightly larger request in the same class gets the same block back.
    void* b = pool.allocate(1020);
    BOOST_TEST(b == a);
    BOOST_TEST(driver.allocations == 1u);
    // A steady state of grow-and-free allocates nothing new.
    for (int i = 0; i < 100; ++i) {
      void* x = pool.allocate(4 << 20);
      void* y = pool.allocate(300);
      pool.deallocate(x);
      pool.deallocate(y);
    }
    BOOST_TEST(driver.allocations == 3u);
    pool.deallocate(b);
  }
  BOOST_TEST(driver.live.empty(), "the pool's destructor hands every cached block back");
  BOOST_TEST(driver.frees == 3u);
}

BOOST_AUTO_TEST_CASE(pool_size_classes) {
  BOOST_TEST(MemoryPool::size_class(0) == 512u);
  BOOST_TEST(MemoryPool::size_class(512) == 512u);
  BOOST_TEST(MemoryPool::size_class(513) == 1024u);
  BOOST_TEST(MemoryPool::size_class((1u << 20) - 1) == (1u << 20));
  BOOST_TEST(MemoryPool::size_class((1u << 20) + 1) == (2u << 20));
  BOOST_TEST(MemoryPool::size_class((5u << 20)) == (6u << 20));
}

BOOST_AUTO_TEST_CASE(pool_empties_its_cache_before_giving_up) {
  FakeDriver driver;
  driver.budget = 4u << 20;
  MemoryPool pool = driver.pool();
  void* a = pool.allocate(2u << 20);
  pool.deallocate(a);  // cached: the driver still holds 2 MiB
  void* b = pool.allocate(3u << 20);  // needs the cached block returned first
  BOOST_TEST(b != nullptr);
  BOOST_TEST(pool.bytes_cached() == 0u);
  BOOST_TEST(pool.allocate(1u << 20) == nullptr, "over the budget with nothing cached: out of memory");
  pool.deallocate(b);
}

BOOST_AUTO_TEST_CASE(pool_without_raw_calls_serves_only_from_its_cache) {
  // While a CUDA graph is captured, cudaMalloc and cudaFree are illegal: a miss fails
  // at once and the cache stays as it was.
  FakeDriver driver;
  MemoryPool pool = driver.pool();
  void* a = pool.allocate(4096);
  pool.deallocate(a);
  const uint64_t events = pool.events();
  pool.set_raw_calls(false);
  void* b = pool.allocate(4000);  // the cached block's class
  BOOST_TEST(b == a);
  BOOST_TEST(pool.allocate(1u << 20) == nullptr);
  BOOST_TEST(driver.allocations == 1u);
  BOOST_TEST(driver.frees == 0u, "a miss does not empty the cache");
  BOOST_TEST(pool.events() == events + 1, "the hit moved the memory epoch, the miss did not");
  pool.set_raw_calls(true);
  void* c = pool.allocate(1u << 20);
  BOOST_TEST(c != nullptr);
  pool.deallocate(b);
  pool.deallocate(c);
}

BOOST_AUTO_TEST_CASE(pool_rejects_a_double_free) {
  FakeDriver driver;
  MemoryPool pool = driver.pool();
  void* a = pool.allocate(64);
  pool.deallocate(a);
  BOOST_CHECK_THROW(pool.deallocate(a), std::exception);
}

BOOST_AUTO_TEST_CASE(row_major_gemm_maps_onto_column_major_blas) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int m = 5, n = 7, k = 3;
      // Row-major storage with padded leading dimensions, as layers use them.
      const int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
      std::vector<float> a(static_cast<size_t>((ta ? k : m) * lda)), b(static_cast<size_t>((tb ? n : k) * ldb));
      for (auto& v : a) v = u(rng);
      for (auto& v : b) v = u(rng);
      std::vector<float> want(static_cast<size_t>(m * ldc), 0.5f), got = want;
      cpu::gemm(ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, 0.25f, want.data(), ldc);
      const ColumnMajorGemm g = to_column_major(ta, tb, m, n, k, a.data(), lda, b.data(), ldb);
      cblas_sgemm(CblasColMajor, g.trans_first ? CblasTrans : CblasNoTrans, g.trans_second ? CblasTrans : CblasNoTrans,
                  g.m, g.n, g.k, 1.5f, g.first, g.ld_first, g.second, g.ld_second, 0.25f, got.data(), ldc);
      for (size_t i = 0; i < want.size(); ++i)
        BOOST_TEST(std::abs(got[i] - want[i]) < 1e-5f, "ta " << ta << " tb " << tb << " element " << i);
    }
}

BOOST_AUTO_TEST_SUITE_END()  // test_cuda_host_parts
