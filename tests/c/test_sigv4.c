/* SigV4 signer: AWS documentation vectors, URI encoding, canonicalisation
 * rules and input validation. Random requests are compared against botocore
 * in tests/python/test_sigv4_oracle.py. */
#include "sigv4.h"
#include "error.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define DOC_AK "AKIAIOSFODNN7EXAMPLE"
#define DOC_SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define DOC_DATE "20130524T000000Z"
#define DOC_HOST "examplebucket.s3.amazonaws.com"

static s3x_sigv4_input doc_input(const char *method, const char *path, const s3x_kv *q, size_t nq,
                                 const s3x_kv *h, size_t nh, const char *payload) {
    s3x_sigv4_input in;
    memset(&in, 0, sizeof in);
    in.access_key = DOC_AK;
    in.secret_key = DOC_SK;
    in.region = "us-east-1";
    in.service = "s3";
    in.amz_date = DOC_DATE;
    in.method = method;
    in.encoded_path = path;
    in.query = q;
    in.nquery = nq;
    in.headers = h;
    in.nheaders = nh;
    in.payload_hash = payload;
    return in;
}

/* Signs and compares every intermediate result that is given (NULL = skip). */
static void check_vector(const char *name, const s3x_sigv4_input *in, const char *creq, const char *sts,
                         const char *sig, const char *auth) {
    s3x_sigv4_output out;
    memset(&out, 0, sizeof out);
    int rc = s3x_sigv4_sign(in, &out);
    if (!CHECK(rc == 0, "%s: sign returned %d (%s)", name, rc, s3x_error_last()->message)) {
        s3x_sigv4_output_free(&out);
        return;
    }
    char what[160];
    if (creq) {
        snprintf(what, sizeof what, "%s: canonical request", name);
        CHECK_STREQ(out.canonical_request.data, creq, what);
    }
    if (sts) {
        snprintf(what, sizeof what, "%s: string to sign", name);
        CHECK_STREQ(out.string_to_sign.data, sts, what);
    }
    if (sig) {
        snprintf(what, sizeof what, "%s: signature", name);
        CHECK_STREQ(out.signature, sig, what);
    }
    if (auth) {
        snprintf(what, sizeof what, "%s: authorization", name);
        CHECK_STREQ(out.authorization.data, auth, what);
    }
    s3x_sigv4_output_free(&out);
}

/* The four examples of "Signature Calculations for the Authorization Header:
 * Transferring Payload in a Single Chunk" (AWS S3 API reference). */
static void test_aws_doc_examples(void) {
    {
        const s3x_kv h[] = {{"Host", DOC_HOST},
                            {"Range", "bytes=0-9"},
                            {"x-amz-content-sha256", EMPTY_SHA},
                            {"x-amz-date", DOC_DATE}};
        s3x_sigv4_input in = doc_input("GET", "/test.txt", NULL, 0, h, 4, EMPTY_SHA);
        check_vector("GET Object", &in,
                     "GET\n/test.txt\n\n"
                     "host:examplebucket.s3.amazonaws.com\n"
                     "range:bytes=0-9\n"
                     "x-amz-content-sha256:" EMPTY_SHA "\n"
                     "x-amz-date:20130524T000000Z\n\n"
                     "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA,
                     "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                     "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
                     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
                     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                     "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    }
    {
        const char body[] = "Welcome to Amazon S3.";
        char hash[65];
        s3x_sha256_hex(body, strlen(body), hash);
        CHECK_STREQ(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                    "sha256 of the PUT Object body");
        s3x_buf path = S3X_BUF_INIT;
        CHECK(s3x_uri_encode(&path, "/test$file.text", 15, 0) == 0, "encode PUT path");
        CHECK_STREQ(path.data, "/test%24file.text", "PUT Object path encoding");
        /* Given in a shuffled order and mixed case: the signer sorts. */
        const s3x_kv h[] = {{"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                            {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                            {"x-amz-date", DOC_DATE},
                            {"Host", DOC_HOST},
                            {"X-Amz-Content-SHA256", hash}};
        s3x_sigv4_input in = doc_input("PUT", path.data, NULL, 0, h, 5, hash);
        check_vector("PUT Object", &in,
                     "PUT\n/test%24file.text\n\n"
                     "date:Fri, 24 May 2013 00:00:00 GMT\n"
                     "host:examplebucket.s3.amazonaws.com\n"
                     "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
                     "x-amz-date:20130524T000000Z\n"
                     "x-amz-storage-class:REDUCED_REDUNDANCY\n\n"
                     "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
                     "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                     "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                     "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
                     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd", NULL);
        s3x_buf_free(&path);
    }
    {
        const s3x_kv q[] = {{"lifecycle", ""}};
        const s3x_kv h[] = {{"Host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA}};
        s3x_sigv4_input in = doc_input("GET", "/", q, 1, h, 3, EMPTY_SHA);
        check_vector("GET Bucket Lifecycle", &in,
                     "GET\n/\nlifecycle=\n"
                     "host:examplebucket.s3.amazonaws.com\n"
                     "x-amz-content-sha256:" EMPTY_SHA "\n"
                     "x-amz-date:20130524T000000Z\n\n"
                     "host;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA,
                     "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                     "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca",
                     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", NULL);
        /* A NULL value is a flag, the same as "". */
        const s3x_kv qn[] = {{"lifecycle", NULL}};
        in.query = qn;
        check_vector("GET Bucket Lifecycle (NULL value)", &in, NULL, NULL,
                     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", NULL);
    }
    {
        const s3x_kv q[] = {{"prefix", "J"}, {"max-keys", "2"}}; /* unsorted on purpose */
        const s3x_kv h[] = {{"Host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA}};
        s3x_sigv4_input in = doc_input("GET", "/", q, 2, h, 3, EMPTY_SHA);
        check_vector("GET Bucket (List Objects)", &in,
                     "GET\n/\nmax-keys=2&prefix=J\n"
                     "host:examplebucket.s3.amazonaws.com\n"
                     "x-amz-content-sha256:" EMPTY_SHA "\n"
                     "x-amz-date:20130524T000000Z\n\n"
                     "host;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA,
                     "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                     "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7",
                     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", NULL);
    }
}

/* aws-c-auth / aws-sig-v4-test-suite "get-vanilla" (service "service", no
 * x-amz-content-sha256 header), also reproduced by botocore's SigV4Auth. */
static void test_get_vanilla(void) {
    const s3x_kv h[] = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
    s3x_sigv4_input in;
    memset(&in, 0, sizeof in);
    in.access_key = "AKIDEXAMPLE";
    in.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    in.region = "us-east-1";
    in.service = "service";
    in.amz_date = "20150830T123600Z";
    in.method = "GET";
    in.encoded_path = "/";
    in.headers = h;
    in.nheaders = 2;
    in.payload_hash = EMPTY_SHA;
    check_vector("get-vanilla", &in,
                 "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" EMPTY_SHA,
                 "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                 "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
                 "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
                 "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

static void enc_case(const char *in, size_t len, int slash, const char *want) {
    s3x_buf b = S3X_BUF_INIT;
    int rc = s3x_uri_encode(&b, in, len, slash);
    char what[200];
    snprintf(what, sizeof what, "uri_encode(\"%s\", encode_slash=%d)", in, slash);
    if (CHECK(rc == 0, "%s returned %d", what, rc)) CHECK_STREQ(b.data, want, what);
    s3x_buf_free(&b);
}
#define ENC(s, slash, want) enc_case((s), sizeof(s) - 1, (slash), (want))

static void test_uri_encode(void) {
    ENC("", 0, "");
    ENC("AZaz09-._~", 1, "AZaz09-._~");
    ENC("caf\xc3\xa9", 0, "caf%C3%A9");                       /* é */
    ENC("\xe6\x97\xa5\xe6\x9c\xac", 0, "%E6%97%A5%E6%9C%AC"); /* 日本 */
    ENC("\xf0\x9f\x98\x80", 1, "%F0%9F%98%80");               /* 😀 */
    ENC("a b", 0, "a%20b");                                   /* never '+' for a space */
    ENC("+=&?#%", 0, "%2B%3D%26%3F%23%25");
    ENC("~", 1, "~");
    ENC("a//b", 0, "a//b");
    ENC("a//b", 1, "a%2F%2Fb");
    ENC("/leading", 0, "/leading");
    ENC("/leading", 1, "%2Fleading");
    ENC("./../x", 0, "./../x"); /* S3 never normalises */
    ENC("*!'()", 0, "%2A%21%27%28%29");
    ENC("$@:;,[]{}|\\^`\"<>", 1, "%24%40%3A%3B%2C%5B%5D%7B%7D%7C%5C%5E%60%22%3C%3E");
    ENC("\x7f\x01", 1, "%7F%01");
    /* An embedded NUL is a byte like any other when len says so. */
    {
        s3x_buf b = S3X_BUF_INIT;
        CHECK(s3x_uri_encode(&b, "a\0b", 3, 1) == 0, "encode with NUL");
        CHECK_STREQ(b.data, "a%00b", "uri_encode with embedded NUL");
        /* Appends, does not overwrite. */
        CHECK(s3x_uri_encode(&b, "/c d", 4, 0) == 0, "append");
        CHECK_STREQ(b.data, "a%00b/c%20d", "uri_encode appends to the buffer");
        CHECK_INTEQ(b.len, 11, "length after append");
        s3x_buf_free(&b);
    }
    /* Every byte value, both modes. */
    {
        char all[256];
        for (int i = 0; i < 256; i++) all[i] = (char)i;
        s3x_buf b = S3X_BUF_INIT, b2 = S3X_BUF_INIT;
        CHECK(s3x_uri_encode(&b, all, 256, 1) == 0, "encode all bytes");
        CHECK(s3x_uri_encode(&b2, all, 256, 0) == 0, "encode all bytes (slash kept)");
        size_t nunres = 66; /* 26+26+10+4 */
        CHECK_INTEQ(b.len, nunres + (256 - nunres) * 3, "encoded length of all bytes, slash encoded");
        CHECK_INTEQ(b2.len, nunres + 1 + (255 - nunres) * 3, "encoded length of all bytes, slash kept");
        CHECK(strstr(b.data, "%2F") != NULL && strstr(b2.data, "%2F") == NULL, "slash handling over all bytes");
        CHECK(strstr(b.data, "%FF") != NULL && strstr(b.data, "%ff") == NULL, "uppercase hex");
        s3x_buf_free(&b);
        s3x_buf_free(&b2);
    }
}

static void test_hashes_and_dates(void) {
    char hex[65];
    s3x_sha256_hex("", 0, hex);
    CHECK_STREQ(hex, EMPTY_SHA, "sha256(\"\")");
    s3x_sha256_hex("abc", 3, hex);
    CHECK_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256(\"abc\")");
    unsigned char raw[32];
    for (int i = 0; i < 32; i++) raw[i] = (unsigned char)(i * 8 + 7);
    s3x_hex32(raw, hex);
    CHECK_STREQ(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff", "hex32");

    static const struct {
        long long t;
        const char *want;
    } dates[] = {
        {0, "19700101T000000Z"},
        {1369353600, "20130524T000000Z"},
        {1440938160, "20150830T123600Z"},
        {951782400, "20000229T000000Z"},   /* leap day, century divisible by 400 */
        {-1, "19691231T235959Z"},
        {-86400, "19691231T000000Z"},
        {1709251199, "20240229T235959Z"},
        {253402300799LL, "99991231T235959Z"},
        {253402300800LL, "99991231T235959Z"},  /* clamped */
        {-62167219200LL, "00000101T000000Z"},
        {-62167219201LL, "00000101T000000Z"},  /* clamped */
    };
    for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++) {
        char d[17];
        memset(d, 'x', sizeof d);
        s3x_amz_date((int64_t)dates[i].t, d);
        char what[64];
        snprintf(what, sizeof what, "amz_date(%lld)", dates[i].t);
        CHECK_STREQ(d, dates[i].want, what);
    }
    /* 2100 is not a leap year: 2100-02-28T23:59:59 + 1s is March 1st. */
    char d[17];
    s3x_amz_date(4107542399LL, d);
    CHECK_STREQ(d, "21000228T235959Z", "amz_date(2100-02-28 23:59:59)");
    s3x_amz_date(4107542400LL, d);
    CHECK_STREQ(d, "21000301T000000Z", "amz_date(2100-03-01)");
}

static s3x_sigv4_input simple_input(const s3x_kv *h, size_t nh, const s3x_kv *q, size_t nq) {
    return doc_input("GET", "/b/k", q, nq, h, nh, EMPTY_SHA);
}

static void test_canonicalisation(void) {
    /* Header names lowercased, values trimmed, inner blank runs collapsed,
     * duplicates joined with ',' in their given order. */
    {
        const s3x_kv h[] = {{"X-Amz-Meta-B", "  two\t\twords   here  "},
                            {"host", DOC_HOST},
                            {"X-AMZ-META-A", "z"},
                            {"x-amz-meta-a", " y "},
                            {"x-amz-date", DOC_DATE},
                            {"x-amz-meta-empty", "   "},
                            {"X-Amz-Meta-A", "x"},
                            {"x-amz-content-sha256", EMPTY_SHA}};
        s3x_sigv4_input in = simple_input(h, 8, NULL, 0);
        check_vector("header canonicalisation", &in,
                     "GET\n/b/k\n\n"
                     "host:" DOC_HOST "\n"
                     "x-amz-content-sha256:" EMPTY_SHA "\n"
                     "x-amz-date:" DOC_DATE "\n"
                     "x-amz-meta-a:z,y,x\n"
                     "x-amz-meta-b:two words here\n"
                     "x-amz-meta-empty:\n\n"
                     "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a;x-amz-meta-b;x-amz-meta-empty\n" EMPTY_SHA,
                     NULL, NULL, NULL);
    }
    /* Query: encoded with '/' as %2F, sorted by encoded key then encoded value
     * (not by the joined "k=v" string: "a" sorts before "a-b" although
     * "a-b=" < "a=" bytewise). */
    {
        const s3x_kv h[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA}};
        const s3x_kv q[] = {{"prefix", "a/b c+d"}, {"a-b", "1"},   {"a", "2"},       {"uploads", ""},
                            {"k", "b"},            {"k", "a"},     {"k", ""},        {"Z", "caf\xc3\xa9"},
                            {"~t", "*"},           {"list-type", "2"}, {"continuation-token", "1/2=3=="}};
        s3x_sigv4_input in = simple_input(h, 3, q, sizeof q / sizeof q[0]);
        check_vector("query canonicalisation", &in,
                     "GET\n/b/k\n"
                     "Z=caf%C3%A9&a=2&a-b=1&continuation-token=1%2F2%3D3%3D%3D&k=&k=a&k=b&list-type=2&"
                     "prefix=a%2Fb%20c%2Bd&uploads=&~t=%2A\n"
                     "host:" DOC_HOST "\n"
                     "x-amz-content-sha256:" EMPTY_SHA "\n"
                     "x-amz-date:" DOC_DATE "\n\n"
                     "host;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA,
                     NULL, NULL, NULL);
    }
    /* Sorting happens on the encoded form: '%' (0x25) sorts before letters,
     * so "%20x" ("' 'x") comes before "A". */
    {
        const s3x_kv h[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA}};
        const s3x_kv q[] = {{"A", "1"}, {" x", "2"}, {"-", "3"}};
        s3x_sigv4_input in = simple_input(h, 3, q, 3);
        s3x_sigv4_output out;
        memset(&out, 0, sizeof out);
        CHECK(s3x_sigv4_sign(&in, &out) == 0, "sign encoded-order query");
        const char *nl = out.canonical_request.data ? strchr(out.canonical_request.data, '\n') : NULL;
        nl = nl ? strchr(nl + 1, '\n') : NULL;
        CHECK(nl && strncmp(nl + 1, "%20x=2&-=3&A=1\n", 15) == 0, "query sorted by encoded key: %s",
              nl ? nl + 1 : "(none)");
        s3x_sigv4_output_free(&out);
    }
    /* UNSIGNED-PAYLOAD and a session token. */
    {
        const s3x_kv h[] = {{"host", DOC_HOST},
                            {"x-amz-date", DOC_DATE},
                            {"x-amz-content-sha256", S3X_UNSIGNED_PAYLOAD},
                            {"x-amz-security-token", "tok/en+=="}};
        s3x_sigv4_input in = simple_input(h, 4, NULL, 0);
        in.payload_hash = S3X_UNSIGNED_PAYLOAD;
        check_vector("unsigned payload + token", &in,
                     "GET\n/b/k\n\n"
                     "host:" DOC_HOST "\n"
                     "x-amz-content-sha256:UNSIGNED-PAYLOAD\n"
                     "x-amz-date:" DOC_DATE "\n"
                     "x-amz-security-token:tok/en+==\n\n"
                     "host;x-amz-content-sha256;x-amz-date;x-amz-security-token\nUNSIGNED-PAYLOAD",
                     NULL, NULL, NULL);
    }
    /* The output can be reused: a second signature replaces the first. */
    {
        const s3x_kv h[] = {{"Host", DOC_HOST},
                            {"Range", "bytes=0-9"},
                            {"x-amz-content-sha256", EMPTY_SHA},
                            {"x-amz-date", DOC_DATE}};
        s3x_sigv4_input in = doc_input("GET", "/test.txt", NULL, 0, h, 4, EMPTY_SHA);
        s3x_sigv4_output out;
        memset(&out, 0, sizeof out);
        int rc1 = s3x_sigv4_sign(&in, &out);
        int rc2 = s3x_sigv4_sign(&in, &out);
        CHECK(rc1 == 0 && rc2 == 0, "sign twice into one output");
        CHECK_STREQ(out.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
                    "signature after reuse");
        CHECK(strstr(out.authorization.data, "AWS4-HMAC-SHA256 Credential") == out.authorization.data &&
                  strstr(out.authorization.data + 1, "AWS4-HMAC") == NULL,
              "authorization not appended twice: %s", out.authorization.data);
        s3x_sigv4_output_free(&out);
        s3x_sigv4_output_free(&out); /* idempotent */
    }
    /* Many query parameters and headers: order and merging hold at scale. */
    {
        enum { N = 3000 };
        s3x_kv *q = calloc(N, sizeof *q), *h = calloc(N + 3, sizeof *h);
        char (*names)[24] = calloc(N, sizeof *names);
        if (CHECK(q && h && names, "alloc")) {
            for (int i = 0; i < N; i++) {
                snprintf(names[i], sizeof names[i], "k%05d", (i * 7919) % N);
                q[i].key = names[i];
                q[i].value = "v";
                h[i].key = names[i];
                h[i].value = (i % 2) ? " a " : "b";
            }
            h[N] = (s3x_kv){"host", DOC_HOST};
            h[N + 1] = (s3x_kv){"x-amz-date", DOC_DATE};
            h[N + 2] = (s3x_kv){"x-amz-content-sha256", EMPTY_SHA};
            s3x_sigv4_input in = simple_input(h, N + 3, q, N);
            s3x_sigv4_output out;
            memset(&out, 0, sizeof out);
            int rc = s3x_sigv4_sign(&in, &out);
            CHECK(rc == 0, "sign with %d params and headers", N);
            const char *cr = out.canonical_request.data;
            const char *qs = cr ? strchr(strchr(cr, '\n') + 1, '\n') + 1 : NULL;
            int sorted = qs != NULL;
            for (int i = 0; sorted && i < N; i++) {
                char want[32];
                int n = snprintf(want, sizeof want, "%sk%05d=v", i ? "&" : "", i);
                if (strncmp(qs, want, (size_t)n) != 0) sorted = 0;
                qs += n;
            }
            CHECK(sorted && *qs == '\n', "large query sorted");
            CHECK(cr && strstr(cr, "\nk00000:b\nk00001:a\n") != NULL, "large header set sorted");
            s3x_sigv4_output_free(&out);
        }
        free(q);
        free(h);
        free(names);
    }
}

static void expect_einval(const char *what, const s3x_sigv4_input *in, const char *msg_part) {
    s3x_sigv4_output out;
    memset(&out, 0, sizeof out);
    s3x_error_clear();
    int rc = s3x_sigv4_sign(in, &out);
    const char *m = s3x_error_last()->message;
    CHECK(rc == S3X_EINVAL, "%s: expected S3X_EINVAL, got %d", what, rc);
    CHECK(strstr(m, msg_part) != NULL, "%s: message \"%s\" should mention \"%s\"", what, m, msg_part);
    CHECK(out.signature[0] == '\0', "%s: no signature on failure", what);
    s3x_sigv4_output_free(&out);
}

static void test_validation(void) {
    const s3x_kv h[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA}};
    s3x_sigv4_input in;

    in = simple_input(h, 3, NULL, 0);
    in.access_key = NULL;
    expect_einval("no access key", &in, "access key");
    in = simple_input(h, 3, NULL, 0);
    in.access_key = "AK/ID";
    expect_einval("slash in access key", &in, "access key");
    in = simple_input(h, 3, NULL, 0);
    in.secret_key = "";
    expect_einval("empty secret", &in, "secret");
    in = simple_input(h, 3, NULL, 0);
    in.region = NULL;
    expect_einval("no region", &in, "region");
    in = simple_input(h, 3, NULL, 0);
    in.service = "s 3";
    expect_einval("bad service", &in, "service");
    in = simple_input(h, 3, NULL, 0);
    in.amz_date = "2013-05-24T00:00:00Z";
    expect_einval("ISO date", &in, "amz_date");
    in = simple_input(h, 3, NULL, 0);
    in.method = "";
    expect_einval("no method", &in, "method");
    in = simple_input(h, 3, NULL, 0);
    in.method = "GE T";
    expect_einval("bad method", &in, "method");
    in = simple_input(h, 3, NULL, 0);
    in.encoded_path = "test.txt";
    expect_einval("relative path", &in, "begin with '/'");
    in = simple_input(h, 3, NULL, 0);
    in.encoded_path = "/a b";
    expect_einval("unencoded space in path", &in, "unencoded");
    in = simple_input(h, 3, NULL, 0);
    in.encoded_path = "/a%2fb";
    expect_einval("lowercase escape in path", &in, "unencoded");
    in = simple_input(h, 3, NULL, 0);
    in.encoded_path = "/a%2";
    expect_einval("short escape in path", &in, "unencoded");
    in = simple_input(h, 3, NULL, 0);
    in.payload_hash = NULL;
    expect_einval("no payload hash", &in, "payload_hash");
    in = simple_input(h, 3, NULL, 0);
    in.payload_hash = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
    expect_einval("uppercase payload hash", &in, "payload_hash");
    in = simple_input(h, 3, NULL, 0);
    in.nquery = 1;
    expect_einval("NULL query array", &in, "query");
    {
        const s3x_kv q[] = {{NULL, "x"}};
        in = simple_input(h, 3, q, 1);
        expect_einval("query without name", &in, "no name");
    }
    in = simple_input(NULL, 0, NULL, 0);
    expect_einval("no headers", &in, "headers");
    {
        const s3x_kv h2[] = {{"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA}};
        in = simple_input(h2, 2, NULL, 0);
        expect_einval("no host", &in, "host");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-content-sha256", EMPTY_SHA}};
        in = simple_input(h2, 2, NULL, 0);
        expect_einval("no x-amz-date", &in, "x-amz-date");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-date", "20130524T000001Z"}, {"x-amz-content-sha256", EMPTY_SHA}};
        in = simple_input(h2, 3, NULL, 0);
        expect_einval("x-amz-date mismatch", &in, "differs");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}};
        in = simple_input(h2, 2, NULL, 0);
        expect_einval("no x-amz-content-sha256 for s3", &in, "x-amz-content-sha256");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", S3X_UNSIGNED_PAYLOAD}};
        in = simple_input(h2, 3, NULL, 0);
        expect_einval("x-amz-content-sha256 mismatch", &in, "differs from payload_hash");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA},
                             {"x-amz-meta-a", "line\r\nInjected: 1"}};
        in = simple_input(h2, 4, NULL, 0);
        expect_einval("CRLF in header value", &in, "control character");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA},
                             {"bad name", "v"}};
        in = simple_input(h2, 4, NULL, 0);
        expect_einval("space in header name", &in, "header name");
    }
    {
        const s3x_kv h2[] = {{"host", DOC_HOST}, {"x-amz-date", DOC_DATE}, {"x-amz-content-sha256", EMPTY_SHA},
                             {"x-amz-meta-a", NULL}};
        in = simple_input(h2, 4, NULL, 0);
        expect_einval("NULL header value", &in, "no value");
    }
    expect_einval("NULL input", NULL, "no input");
    in = simple_input(h, 3, NULL, 0);
    CHECK(s3x_sigv4_sign(&in, NULL) == S3X_EINVAL, "NULL output rejected");
}

/* Unicode whitespace in header values, as botocore trims a str (issue 11:
 * a no-break space was kept here and collapsed there), and the UTF-8 helpers
 * the config parser and the XML builder share. Compared with botocore in
 * tests/python/test_sigv4_oracle.py too. */
static void test_unicode_space(void) {
    {
        const s3x_kv h[] = {{"host", DOC_HOST},
                            {"x-amz-date", "\xc2\xa0" DOC_DATE "\xe3\x80\x80"},
                            {"x-amz-content-sha256", EMPTY_SHA},
                            {"x-amz-meta-a", "\xc2\xa0" "a\xc2\xa0\xc2\xa0" "b \xe2\x80\x83" "c\xc2\x85"},
                            {"x-amz-meta-b", "zero\xe2\x80\x8bwidth\xef\xbb\xbf stays"},
                            {"x-amz-meta-c", "bad\xc2 \xa0utf8\xe2\xe2\x80\x80x"},
                            {"x-amz-meta-d", "\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\x9f\xe1\x9a\x80"}};
        s3x_sigv4_input in = simple_input(h, 7, NULL, 0);
        check_vector("Unicode spaces in header values", &in,
                     "GET\n/b/k\n\n"
                     "host:" DOC_HOST "\n"
                     "x-amz-content-sha256:" EMPTY_SHA "\n"
                     "x-amz-date:" DOC_DATE "\n"
                     "x-amz-meta-a:a b c\n"
                     "x-amz-meta-b:zero\xe2\x80\x8bwidth\xef\xbb\xbf stays\n"
                     "x-amz-meta-c:bad\xc2 \xa0utf8\xe2 x\n"
                     "x-amz-meta-d:\n\n"
                     "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a;x-amz-meta-b;x-amz-meta-c;x-amz-meta-d\n"
                     EMPTY_SHA,
                     NULL, NULL, NULL);
    }
    struct {
        const char *s;
        size_t len;
        uint32_t cp;
    } dec[] = {
        {"A", 1, 'A'},
        {"\xc2\x80", 2, 0x80},
        {"\xdf\xbf", 2, 0x7ff},
        {"\xe0\xa0\x80", 3, 0x800},
        {"\xed\x9f\xbf", 3, 0xd7ff},
        {"\xee\x80\x80", 3, 0xe000},
        {"\xef\xbf\xbf", 3, 0xffff},
        {"\xf0\x90\x80\x80", 4, 0x10000},
        {"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
        {"\x80", 0, 0},             /* a lone continuation byte */
        {"\xc0\x80", 0, 0},         /* overlong NUL */
        {"\xc1\xbf", 0, 0},         /* overlong */
        {"\xe0\x9f\xbf", 0, 0},     /* overlong 3-byte */
        {"\xf0\x8f\xbf\xbf", 0, 0}, /* overlong 4-byte */
        {"\xed\xa0\x80", 0, 0},     /* U+D800 */
        {"\xed\xbf\xbf", 0, 0},     /* U+DFFF */
        {"\xf4\x90\x80\x80", 0, 0}, /* U+110000 */
        {"\xf5\x80\x80\x80", 0, 0},
        {"\xff", 0, 0},
        {"\xe2\x82", 0, 0},         /* cut short by the NUL */
        {"\xe2\x28\xa1", 0, 0},     /* not a continuation byte */
    };
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
        uint32_t cp = 0;
        size_t len = s3x_utf8_decode(dec[i].s, strlen(dec[i].s), &cp);
        CHECK(len == dec[i].len && (!len || cp == dec[i].cp), "decode case %zu: len %zu cp U+%04X", i, len,
              (unsigned)cp);
    }
    uint32_t cp;
    CHECK(s3x_utf8_decode("\xe2\x82\xac", 2, &cp) == 0, "decode stops at n");
    CHECK(s3x_utf8_decode("x", 0, &cp) == 0, "decode of nothing");
    const char *spaces[] = {" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\xc2\x85", "\xc2\xa0",
                            "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9",
                            "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
    for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; i++)
        CHECK(s3x_utf8_space(spaces[i], strlen(spaces[i])) == strlen(spaces[i]), "space %zu", i);
    const char *not_spaces[] = {"a", "\x1b", "\x7f", "\xe2\x80\x8b", "\xef\xbb\xbf", "\xc2\xa1", "\xe2\x80\x8c",
                                "\xc2", "\xe3\x80", "\xa0"};
    for (size_t i = 0; i < sizeof not_spaces / sizeof not_spaces[0]; i++)
        CHECK(s3x_utf8_space(not_spaces[i], strlen(not_spaces[i])) == 0, "not a space %zu", i);
    CHECK(s3x_utf8_space("\xc2\xa0", 1) == 0, "space stops at n");
}

int main(void) {
    test_aws_doc_examples();
    test_get_vanilla();
    test_uri_encode();
    test_hashes_and_dates();
    test_canonicalisation();
    test_unicode_space();
    test_validation();
    s3x_error_clear();
    return tap_summary("test_sigv4");
}
