/* A tiny native app: puts an object and reads it back with the s3xfer C API.
 * usage: s3xfer-example BUCKET KEY   (endpoint and keys from the AWS environment) */
#include <stdio.h>
#include <string.h>
#include <s3xfer/s3xfer.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BUCKET KEY\n", argv[0]);
        return 2;
    }
    s3x_client *c = NULL;
    if (s3x_client_new(&c) != 0) return 1;
    const char msg[] = "hello from a native app";
    int rc = s3x_put_object(c, argv[1], argv[2], msg, sizeof msg - 1, "text/plain", NULL);
    void *data = NULL;
    size_t len = 0;
    if (!rc) rc = s3x_get_object(c, argv[1], argv[2], -1, -1, &data, &len, NULL);
    if (rc) {
        const s3x_error *e = s3x_error_last();
        fprintf(stderr, "error %d (%s): %s\n", e->code, s3x_strerror(e->code), e->message);
    } else {
        printf("%.*s\n", (int)len, (const char *)data);
        rc = (len == sizeof msg - 1 && memcmp(data, msg, len) == 0) ? 0 : 1;
    }
    s3x_free(data);
    s3x_client_free(c);
    return rc ? 1 : 0;
}
