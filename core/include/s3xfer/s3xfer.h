/* s3xfer: fast, memory-bounded transfers to and from S3-compatible storage.
 * The umbrella header: include this one. */
#ifndef S3XFER_H
#define S3XFER_H

#define S3XFER_VERSION_MAJOR 0
#define S3XFER_VERSION_MINOR 1
#define S3XFER_VERSION_PATCH 0
#define S3XFER_VERSION "0.1.0"

#include "s3xfer/errors.h"

#endif
