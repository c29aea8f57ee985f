// tensorseal — reproducible, safe, provably lossless checkpoints.
// Umbrella header: includes the whole public API.
#pragma once

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tensorseal/limits.h"
#include "tensorseal/safetensors.h"
#include "tensorseal/storage.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"
#include "tensorseal/version.h"
#include "tensorseal/write.h"
