/* s3xfer: symbol visibility for the public API. */
#ifndef S3XFER_EXPORT_H
#define S3XFER_EXPORT_H
#if defined(S3X_BUILDING) && defined(__GNUC__)
#define S3X_API __attribute__((visibility("default")))
#else
#define S3X_API
#endif
#endif
