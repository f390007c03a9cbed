/* Growable byte buffer used throughout the engine (private). */
#ifndef S3X_BUF_H
#define S3X_BUF_H
#include <stddef.h>
#include <stdarg.h>

typedef struct s3x_buf {
    char *data;   /* always NUL-terminated when non-NULL (len excludes the NUL) */
    size_t len;
    size_t cap;
} s3x_buf;

#define S3X_BUF_INIT {NULL, 0, 0}

/* All return 0 or S3X_ENOMEM. */
int s3x_buf_reserve(s3x_buf *b, size_t extra);
int s3x_buf_append(s3x_buf *b, const void *p, size_t n);
int s3x_buf_puts(s3x_buf *b, const char *s);
int s3x_buf_printf(s3x_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int s3x_buf_vprintf(s3x_buf *b, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 0)))
#endif
    ;
void s3x_buf_clear(s3x_buf *b);  /* len = 0, keeps memory */
void s3x_buf_free(s3x_buf *b);   /* releases memory, back to S3X_BUF_INIT */
/* A NUL-terminated copy of the n bytes at s (which need no NUL), or NULL. */
char *s3x_strndup(const char *s, size_t n);
/* Overwrites n bytes with zeros in a way the compiler may not drop (for
 * secrets about to be freed). */
void s3x_wipe(void *p, size_t n);
/* Wipes and frees a NUL-terminated secret; NULL is fine. */
void s3x_free_secret(char *s);
/* Transfers ownership of the data to the caller (never NULL on success; "" for empty). */
char *s3x_buf_detach(s3x_buf *b);

#endif
