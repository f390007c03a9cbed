/* The pieces of the credential chain that need no network: the strict JSON
 * reader (json.c), ISO 8601 expirations, the STS answer parser, the
 * credential_process command splitter (checked against Python's
 * shlex.split, which botocore uses), snapshots and their refresh windows. */
#include "client_internal.h"
#include "creds.h"
#include "error.h"
#include "json.h"
#include "s3xml.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *last_msg(void) { return s3x_error_last()->message; }

static int parse_ok(const char *text, s3x_json **j) {
    *j = NULL;
    return s3x_json_parse(text, strlen(text), "doc", S3X_ECREDENTIALS, j) == 0;
}

static void test_json(void) {
    s3x_json *j;
    const char *doc = " {\"Version\": 1, \"AccessKeyId\": \"AK\", \"SecretAccessKey\": \"s\\u00e9\\ud83d\\ude00\\n\","
                      " \"SessionToken\": null, \"n\": -0.5e+3, \"o\": {\"x\": [1, 2, {}]}, \"a\": [], \"t\": true} \n";
    if (CHECK(parse_ok(doc, &j), "a credential_process document: %s", last_msg())) {
        s3x_json_kind k;
        CHECK_STREQ(s3x_json_get(j, "Version", &k), "1", "number as its text");
        CHECK(k == S3X_JSON_NUMBER, "Version is a number");
        CHECK_STREQ(s3x_json_string(j, "SecretAccessKey"), "s\xc3\xa9\xf0\x9f\x98\x80\n", "escapes and surrogates");
        CHECK(s3x_json_string(j, "SessionToken") == NULL, "null is not a string");
        CHECK(s3x_json_get(j, "SessionToken", &k) && k == S3X_JSON_NULL, "null kept as null");
        CHECK(s3x_json_get(j, "o", &k) == NULL && k == S3X_JSON_OBJECT, "nested object skipped");
        CHECK(s3x_json_get(j, "missing", &k) == NULL && k == 0, "absent member");
        CHECK(s3x_json_count(j) == 8, "8 top-level members");
    }
    s3x_json_free(j);

    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "is empty"},
        {"[1]", "expected a JSON object"},
        {"{\"a\":1,}", "expected a member name"},
        {"{\"a\":1} x", "text after the object"},
        {"{'a':1}", "expected a member name"},
        {"{\"a\":01}", "expected ','"},
        {"{\"a\":NaN}", "unexpected character"},
        {"{\"a\":1,\"a\":2}", "a member name given twice"},
        {"{\"a\":\"\\u0000\"}", "U+0000"},
        {"{\"a\":\"\\ud800\"}", "high surrogate"},
        {"{\"a\":\"\\udc00\"}", "lone low surrogate"},
        {"{\"a\":\"tab\there\"}", "control character"},
        {"{\"a\":\"\xc3\x28\"}", "invalid UTF-8"},
        {"{\"a\":\"\\x\"}", "unknown escape"},
        {"{\"a\":tru}", "unexpected character"},
        {"{\"a\":1 /* c */}", "expected ','"},
        {"{\"a\":\"open}", "unterminated string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = (s3x_json *)&j;
        int rc = s3x_json_parse(bad[i].text, strlen(bad[i].text), "doc", S3X_ECREDENTIALS, &j);
        CHECK(rc == S3X_ECREDENTIALS && j == NULL && strstr(last_msg(), bad[i].why) && !strncmp(last_msg(), "doc", 3),
              "refused %s: %s", bad[i].text, last_msg());
    }
    /* nesting is bounded */
    char deep[200];
    memset(deep, '[', sizeof deep);
    deep[0] = '{';
    memcpy(deep + 1, "\"a\":", 4);
    deep[sizeof deep - 1] = '\0';
    CHECK(s3x_json_parse(deep, strlen(deep), "doc", S3X_ECREDENTIALS, &j) == S3X_ECREDENTIALS &&
              strstr(last_msg(), "nested too deeply"),
          "deep nesting refused: %s", last_msg());
    /* size is bounded */
    size_t big = S3X_JSON_MAX_BYTES + 1;
    char *b = malloc(big);
    memset(b, ' ', big);
    b[0] = '{';
    b[big - 1] = '}';
    CHECK(s3x_json_parse(b, big, "doc", S3X_ECREDENTIALS, &j) == S3X_ECREDENTIALS && strstr(last_msg(), "too large"),
          "a document over the limit: %s", last_msg());
    free(b);
    /* a secret never appears in a message */
    const char *leak = "{\"SecretAccessKey\": \"TOPSECRET\", \"x\": bad}";
    s3x_json_parse(leak, strlen(leak), "doc", S3X_ECREDENTIALS, &j);
    CHECK(!strstr(last_msg(), "TOPSECRET"), "no value in the message: %s", last_msg());
}

static void test_time(void) {
    double t = 0;
    CHECK(s3x_parse_iso8601("2026-12-03T10:00:00Z", &t) == 0 && t == 1796292000.0, "Z: %.0f", t);
    CHECK(s3x_parse_iso8601("2026-12-03T11:30:00+01:30", &t) == 0 && t == 1796292000.0, "offset: %.0f", t);
    CHECK(s3x_parse_iso8601("2026-12-03T10:00:00.250Z", &t) == 0 && t == 1796292000.25, "fraction: %f", t);
    const char *bad[] = {"2026-12-03 10:00:00", "2026-13-03T10:00:00Z", "2026-12-03T10:00:00", "yesterday",
                         "2026-12-03T10:00:00Zjunk", "2026-12-03T25:00:00Z", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(s3x_parse_iso8601(bad[i], &t) == -1, "refused '%s'", bad[i]);
}

static void test_sts(void) {
    const char *ok = "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleResult>"
                     "<Credentials><AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>sk</SecretAccessKey>"
                     "<SessionToken>tok</SessionToken><Expiration>2026-12-03T10:00:00Z</Expiration></Credentials>"
                     "</AssumeRoleResult></AssumeRoleResponse>";
    s3x_xml_sts s;
    memset(&s, 0, sizeof s);
    if (CHECK(s3x_xml_parse_sts(ok, strlen(ok), "AssumeRole", &s) == 0, "AssumeRole answer: %s", last_msg())) {
        CHECK_STREQ(s.access_key, "ASIA1", "key id");
        CHECK_STREQ(s.session_token, "tok", "token");
        CHECK(s.error_code == NULL, "no error");
    }
    s3x_xml_sts_free(&s);
    const char *err = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>no</Message>"
                      "</Error></ErrorResponse>";
    CHECK(s3x_xml_parse_sts(err, strlen(err), "AssumeRole", &s) == 0 && s.error_code &&
              !strcmp(s.error_code, "AccessDenied") && !s.access_key,
          "an ErrorResponse");
    s3x_xml_sts_free(&s);
    const char *partial = "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>A</AccessKeyId>"
                          "</Credentials></AssumeRoleResult></AssumeRoleResponse>";
    CHECK(s3x_xml_parse_sts(partial, strlen(partial), "AssumeRole", &s) == S3X_EXML &&
              strstr(last_msg(), "missing <SecretAccessKey>") && !s.access_key,
          "incomplete credentials refused: %s", last_msg());
    CHECK(s3x_xml_parse_sts(ok, strlen(ok), "AssumeRoleWithWebIdentity", &s) == S3X_EXML &&
              strstr(last_msg(), "unexpected root element"),
          "the answer must be to the action asked: %s", last_msg());
}

/* Expected words from Python 3.11: shlex.split(cmd). */
static void test_split(void) {
    static const struct {
        const char *cmd;
        const char *words[8];
    } cases[] = {
        {"prog a b", {"prog", "a", "b"}},
        {"  prog\t'two words'  \"x y\" ", {"prog", "two words", "x y"}},
        {"prog 'semi;colon' $HOME `id` | cat", {"prog", "semi;colon", "$HOME", "`id`", "|", "cat"}},
        {"prog a\\ b \"q\\\"x\" \"\\$v\"", {"prog", "a b", "q\"x", "\\$v"}},
        {"prog '' \"\"", {"prog", "", ""}},
        {"p'ie'ce\"s\"", {"pieces"}},
        {"prog 'it'\\''s'", {"prog", "it's"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char **argv = NULL;
        const char *why = NULL;
        if (!CHECK(s3x_split_command(cases[i].cmd, &argv, &why) == 0, "splits: %s", cases[i].cmd)) continue;
        size_t k = 0;
        for (; cases[i].words[k] && argv[k]; k++)
            CHECK_STREQ(argv[k], cases[i].words[k], cases[i].cmd);
        CHECK(!cases[i].words[k] && !argv[k], "word count of %s", cases[i].cmd);
        s3x_argv_free(argv);
    }
    const char *bad[] = {"", "   ", "prog 'open", "prog \"open", "prog \\"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char **argv = NULL;
        const char *why = NULL;
        CHECK(s3x_split_command(bad[i], &argv, &why) == -1 && why && !argv, "refused '%s' (%s)", bad[i],
              why ? why : "");
    }
}

static void test_snapshots(void) {
    s3x_creds *c = s3x_creds_new("AK", "SK", "", 0);
    CHECK(c && c->session_token == NULL, "an empty token is no token");
    s3x_creds *r = s3x_creds_ref(c);
    CHECK(r == c && atomic_load(&c->refs) == 2, "a reference");
    s3x_creds_unref(r);
    s3x_creds_unref(c);
    double adv, man;
    s3x_creds e = {.expiry = 1000 + 3600, .fetched = 1000};
    s3x_creds_windows(&e, &adv, &man);
    CHECK(adv == 900 && man == 600, "an hour: botocore's 15 and 10 minutes (%g, %g)", adv, man);
    e.expiry = 1004;
    s3x_creds_windows(&e, &adv, &man);
    CHECK(adv == 2 && man == 1, "4 seconds: half and a quarter of the lifetime (%g, %g)", adv, man);
}

/* Signers take snapshots while another thread swaps the client's current
 * one as a refresh does: every snapshot a signer holds is one whole set (key
 * n with token n), and none is freed while held (ASan would say). */
static atomic_int g_mismatch, g_stop;

static void *signer(void *arg) {
    s3x_client *c = arg;
    for (int i = 0; i < 20000 && !atomic_load(&g_stop); i++) {
        s3x_creds *cr = NULL;
        if (s3x_client_creds_acquire(c, &cr)) {
            atomic_fetch_add(&g_mismatch, 1);
            continue;
        }
        if (!cr->session_token || strcmp(cr->access_key + 2, cr->session_token + 3) ||
            strcmp(cr->secret_key + 2, cr->session_token + 3))
            atomic_fetch_add(&g_mismatch, 1);
        s3x_creds_unref(cr);
    }
    return NULL;
}

static void test_snapshot_swaps(void) {
    s3x_client *c = NULL;
    s3x_client_new(&c);
    s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://127.0.0.1:1");
    s3x_client_set_string(c, S3X_CLIENT_ACCESS_KEY, "AK0");
    s3x_client_set_string(c, S3X_CLIENT_SECRET_KEY, "SK0");
    s3x_client_set_string(c, S3X_CLIENT_SESSION_TOKEN, "TOK0");
    if (!CHECK(s3x_client_resolve(c) == 0, "explicit keys resolve: %s", last_msg())) {
        s3x_client_free(c);
        return;
    }
    CHECK_STREQ(s3x_client_credentials_source(c), "explicit", "source");
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, signer, c);
    char ak[32], sk[32], tok[32];
    for (int n = 1; n <= 5000; n++) {
        snprintf(ak, sizeof ak, "AK%d", n);
        snprintf(sk, sizeof sk, "SK%d", n);
        snprintf(tok, sizeof tok, "TOK%d", n);
        s3x_creds *fresh = s3x_creds_new(ak, sk, tok, 0);
        pthread_mutex_lock(&c->cred_mu);
        s3x_creds *old = c->creds;
        c->creds = fresh;
        pthread_mutex_unlock(&c->cred_mu);
        s3x_creds_unref(old);
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&g_mismatch) == 0, "no signer saw a mixed set (%d did)", atomic_load(&g_mismatch));
    s3x_client_free(c);
}

int main(void) {
    /* Region resolution ends at instance metadata: never reach for it here. */
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    test_json();
    test_time();
    test_sts();
    test_split();
    test_snapshots();
    test_snapshot_swaps();
    return tap_summary("test_creds");
}
