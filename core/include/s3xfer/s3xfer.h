/* s3xfer: fast, memory-bounded transfers to and from S3-compatible storage.
 * The umbrella header: include this one. */
#ifndef S3XFER_H
#define S3XFER_H

#define S3XFER_VERSION_MAJOR 0
#define S3XFER_VERSION_MINOR 1
#define S3XFER_VERSION_PATCH 0
#define S3XFER_VERSION "0.1.0"

#include "s3xfer/export.h"
#include "s3xfer/errors.h"
#include "s3xfer/params.h"
#include "s3xfer/client.h"
#include "s3xfer/transfer.h"
#include "s3xfer/batch.h"
#include "s3xfer/bulk.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library version string, e.g. "0.1.0". */
S3X_API const char *s3x_version(void);
#ifdef __cplusplus
}
#endif

#endif
