// tensorseal — reproducible, safe, provably lossless checkpoints.
// Umbrella header: includes the whole public API.
#pragma once

#include "tensorseal/export.h"
#include "tensorseal/canon.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/dcp.h"
#include "tensorseal/diff.h"
#include "tensorseal/dtype.h"
#include "tensorseal/error.h"
#include "tensorseal/explain.h"
#include "tensorseal/git_setup.h"
#include "tensorseal/hash.h"
#include "tensorseal/inspect.h"
#include "tensorseal/limits.h"
#include "tensorseal/safetensors.h"
#include "tensorseal/scan.h"
#include "tensorseal/storage.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"
#include "tensorseal/verify.h"
#include "tensorseal/version.h"
#include "tensorseal/write.h"
