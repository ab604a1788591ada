// A step's sequences and rank 0's device-sampled tokens in their control
// channel form (proto/rill/internal/worker.proto), written by the engine's
// multi-process executor and read by rill-worker, and back.
#ifndef RILL_WORKER_IPC_STEP_WIRE_H_
#define RILL_WORKER_IPC_STEP_WIRE_H_

#include "rill/internal/worker.pb.h"
#include "worker/forward_batch.h"
#include "worker/sampling_spec.h"

namespace rill::worker {

// Tokens, positions, block table, all_logits and device_sampling (the LoRA
// adapter and return_hidden do not cross: tensor-parallel workers run neither).
void SequenceToWire(const SequenceChunk& in, rill::internal::StepSequence* out);
SequenceChunk SequenceFromWire(const rill::internal::StepSequence& in);

void SampledToWire(const DeviceSampledToken& in, rill::internal::SampledToken* out);
DeviceSampledToken SampledFromWire(const rill::internal::SampledToken& in);

}  // namespace rill::worker

#endif  // RILL_WORKER_IPC_STEP_WIRE_H_
