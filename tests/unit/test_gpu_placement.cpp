// Whether gradients go over NCCL: the decision from every rank's placement, the
// reason it names when it falls back to MPI, and the fixed-size record placements
// travel in.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "engine/dist/gpu_placement.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_gpu_placement)  // ctest's unit.test_gpu_placement (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

RankPlacement gpu(const std::string& host, const std::string& uuid, int device) { return {host, true, uuid, device}; }
RankPlacement cpu(const std::string& host) { return {host, false, "", -1}; }

}  // namespace

BOOST_AUTO_TEST_CASE(one_rank_needs_no_nccl) {
  const NcclDecision d = decide_nccl({gpu("h", "GPU-a", 0)});
  BOOST_TEST(!d.use);
  CHECK_CONTAINS(d.reason, "one rank");
}

BOOST_AUTO_TEST_CASE(four_ranks_on_four_gpus_of_one_host_use_nccl) {
  const NcclDecision d =
      decide_nccl({gpu("h", "GPU-a", 0), gpu("h", "GPU-b", 1), gpu("h", "GPU-c", 2), gpu("h", "GPU-d", 3)});
  BOOST_TEST(d.use);
  CHECK_CONTAINS(d.reason, "NCCL across 4 GPUs on 1 host");
}

// The emulated clusters of a one-GPU machine: NCCL refuses two ranks on one GPU.
BOOST_AUTO_TEST_CASE(four_ranks_on_one_gpu_fall_back_naming_ranks_and_gpu) {
  const NcclDecision d =
      decide_nccl({gpu("h", "GPU-a", 0), gpu("h", "GPU-a", 0), gpu("h", "GPU-a", 0), gpu("h", "GPU-a", 0)});
  BOOST_TEST(!d.use);
  CHECK_CONTAINS(d.reason, "ranks 0, 1, 2 and 3 share GPU GPU-a on host h");
  CHECK_CONTAINS(d.reason, "one GPU per rank");
  CHECK_CONTAINS(d.reason, "gradients go through MPI");
}

BOOST_AUTO_TEST_CASE(only_the_ranks_that_share_are_named) {
  const NcclDecision d =
      decide_nccl({gpu("h", "GPU-a", 0), gpu("h", "GPU-b", 1), gpu("h", "GPU-a", 0), gpu("h", "GPU-c", 2)});
  BOOST_TEST(!d.use);
  CHECK_CONTAINS(d.reason, "ranks 0 and 2 share GPU GPU-a on host h");
  BOOST_TEST(!contains(d.reason, "GPU-b"), d.reason);
}

// A uuid is compared within its host only: the same string on two hosts is two GPUs.
BOOST_AUTO_TEST_CASE(the_same_uuid_on_two_hosts_is_two_gpus) {
  const NcclDecision d = decide_nccl({gpu("h1", "A", 0), gpu("h2", "A", 0)});
  BOOST_TEST(d.use, d.reason);
  CHECK_CONTAINS(d.reason, "across 2 GPUs on 2 hosts");
}

BOOST_AUTO_TEST_CASE(mixed_devices_fall_back_naming_the_cpu_ranks) {
  const NcclDecision d = decide_nccl({gpu("h", "GPU-a", 0), gpu("h", "GPU-b", 1), cpu("h"), cpu("h")});
  BOOST_TEST(!d.use);
  CHECK_CONTAINS(d.reason, "ranks 2 and 3 run on the CPU (mixed devices)");
  CHECK_CONTAINS(d.reason, "gradients go through MPI");

  const NcclDecision one = decide_nccl({gpu("h", "GPU-a", 0), cpu("h")});
  CHECK_CONTAINS(one.reason, "rank 1 runs on the CPU");

  const NcclDecision all = decide_nccl({cpu("h"), cpu("h")});
  BOOST_TEST(!all.use);
  CHECK_CONTAINS(all.reason, "every rank runs on the CPU");
}

BOOST_AUTO_TEST_CASE(a_gpu_without_uuid_cannot_be_checked_and_falls_back) {
  const NcclDecision d = decide_nccl({gpu("h", "GPU-a", 0), gpu("h", "", 1)});
  BOOST_TEST(!d.use);
  CHECK_CONTAINS(d.reason, "rank 1 is on a GPU whose uuid could not be read");
}

// 64 ranks on one GPU stay one readable line.
BOOST_AUTO_TEST_CASE(long_rank_lists_fold_into_ranges) {
  std::vector<RankPlacement> ranks(64, gpu("h", "GPU-a", 0));
  ranks[40] = gpu("h", "GPU-b", 1);
  const NcclDecision d = decide_nccl(ranks);
  BOOST_TEST(!d.use);
  CHECK_CONTAINS(d.reason, "ranks 0-39 and 41-63 share GPU GPU-a on host h");
}

BOOST_AUTO_TEST_CASE(the_record_round_trips_a_placement) {
  const RankPlacement p = gpu("node-17.cluster", "GPU-8f0c1a2b-0000-1111-2222-333344445555", 3);
  const RankPlacement back = from_record(to_record(p));
  BOOST_TEST(back.host == p.host);
  BOOST_TEST(back.gpu_uuid == p.gpu_uuid);
  BOOST_TEST(back.on_gpu);
  BOOST_TEST(back.cuda_device == 3);

  const RankPlacement c = from_record(to_record(cpu("h")));
  BOOST_TEST(!c.on_gpu);
  BOOST_TEST(c.gpu_uuid.empty());
  BOOST_TEST(c.cuda_device == -1);
}

BOOST_AUTO_TEST_CASE(long_names_are_cut_to_the_stated_maximum) {
  const std::string host(1000, 'h'), uuid(200, 'u');
  const RankPlacement back = from_record(to_record(gpu(host, uuid, 0)));
  BOOST_TEST(back.host == host.substr(0, PlacementRecord::kMaxHostChars));
  BOOST_TEST(back.gpu_uuid == uuid.substr(0, PlacementRecord::kMaxUuidChars));
  BOOST_TEST(PlacementRecord::kMaxHostChars >= 255u);  // any fully qualified host name fits
}

// A record that arrives without terminating NULs is read within its fields.
BOOST_AUTO_TEST_CASE(a_record_without_terminators_is_read_within_its_fields) {
  PlacementRecord r;
  std::memset(&r, 'x', sizeof r);
  r.on_gpu = 1;
  r.cuda_device = 0;
  const RankPlacement back = from_record(r);
  BOOST_TEST(back.host.size() == PlacementRecord::kMaxHostChars);
  BOOST_TEST(back.gpu_uuid.size() == PlacementRecord::kMaxUuidChars);
}

BOOST_AUTO_TEST_SUITE_END()  // test_gpu_placement
