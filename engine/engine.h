/*
 * engine.h -- the capture engine as the layers above it see it (explain/,
 * binding/): every room's contract, bottom up.  Nothing inside engine/
 * includes this file; each room includes the contracts of the rooms below
 * it (docs/architecture.md, "Rooms"):
 *   base/       assert, clock, FrameView, pycompat, tensorlib, break table
 *   graph/      the graph IR (torch.fx shaped) and its C interpreter
 *   guards/     guard building, checking and rendering
 *   plan/       plans and backends
 *   translate/  the translator: bytecode -> guards + plan + graph
 *   cache/      the per-code cache: CodeCache, CacheFrame, CacheEntry
 *   capture/    hook, miss path, events interface, warnings, engine state
 *   sinks/      the in-memory event log, DYNSCOPE_LOGS, LTTng, the recorder
 * Design: docs/architecture.md and ../shared/DESIGN.md section 3.
 */
#ifndef DYNSCOPE_ENGINE_H
#define DYNSCOPE_ENGINE_H

#include "base/base.h"
#include "base/breaks.h"
#include "graph/graph.h"
#include "guards/guards.h"
#include "plan/plan.h"
#include "translate/translator.h"
#include "cache/cache.h"
#include "capture/capture.h"
#include "capture/events.h"
#include "sinks/sinks.h"

#endif /* DYNSCOPE_ENGINE_H */
