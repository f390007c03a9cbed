/* Knob table access (private). */
#ifndef S3X_PARAMS_INTERNAL_H
#define S3X_PARAMS_INTERNAL_H
#include "s3xfer/params.h"

enum { S3X_SCOPE_CLIENT = 1u, S3X_SCOPE_UPLOAD = 2u, S3X_SCOPE_DOWNLOAD = 4u, S3X_SCOPE_BATCH = 8u };

typedef struct s3x_param_info {
    const char *name;
    int64_t lo, hi, def;
    unsigned scope;
} s3x_param_info;

const s3x_param_info *s3x_param_info_get(s3x_param p);
/* 0 when value is acceptable for a handle of that scope, else S3X_EINVAL with a message. */
int s3x_param_check(s3x_param p, int64_t value, unsigned scope);
void s3x_params_defaults(int64_t values[S3X_PARAM__COUNT]);
#endif
