// How an elastic async trainer's exchange modes keep a chunk's work whole:
// Fluid's communicator queues each step's gradients and GEO-SGD keeps up to
// geo_sgd_need_push_nums steps of progress in the trainer, so before a
// trainer reports a chunk done (cli/chunk_report.h) FlushChunk sends what
// either holds: the communicator's queued gradients, merged, sent and
// answered; GEO-SGD's delta since its last exchange. A chunk reported done
// is then wholly at the pservers; what a dead trainer held goes with it and
// its chunk is trained again whole (docs/elastic.md). GeoTrainersNow
// divides each GEO delta by the trainers live at the exchange, so the
// pservers move by the mean of the live trainers' progress as the job
// grows and shrinks (a fixed job divides by its trainer count, as Fluid).
//
//   options.geo.trainers_now = GeoTrainersNow(*elastic);
//   ... train a chunk ...
//   OAR_RETURN_IF_ERROR(FlushChunk(rt->communicator(), rt->geo(), chunk));
//
// Thread-safety: FlushChunk from the training thread, between steps;
// GeoTrainersNow's function reads the member list (thread-safe).
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "cli/elastic_job.h"
#include "trainer/communicator.h"
#include "trainer/geo_communicator.h"

namespace oar::cli {

// Either may be null (not this trainer's mode).
absl::Status FlushChunk(Communicator* communicator, GeoCommunicator* geo, int64_t chunk);

// The number of trainers live in `job` now (at least 1); `job` must
// outlive the function.
std::function<int()> GeoTrainersNow(const ElasticJob& job);

}  // namespace oar::cli
