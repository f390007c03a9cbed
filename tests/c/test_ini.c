/* The shared config/credentials parser (ini.c) and the client's use of it:
 * lines are read whole (a 10 KiB session token arrives intact; a key hidden
 * after byte 4095 of a comment is not used, issue 11 finding 6), a line over
 * the limit is an error naming the file and the line, and the rules follow
 * botocore's configparser (each expectation below was checked against
 * Python 3.11's configparser and botocore's profile lookup). */
#include "client_internal.h"
#include "error.h"
#include "ini.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static const char *last_msg(void) { return s3x_error_last()->message; }

/* Parses text (NUL-terminated) as a credentials file. */
static s3x_ini *parse(const char *text, int *rc) {
    s3x_ini *ini = (s3x_ini *)&g_dir; /* a sentinel: must become NULL on failure */
    *rc = s3x_ini_parse(text, strlen(text), "credentials file t", S3X_ECREDENTIALS, &ini);
    if (*rc && ini) {
        printf("FAIL parse left *out set after an error\n");
        tap_failed++;
        ini = NULL;
    }
    return ini;
}

/* 1 if text parses and section.key has exactly want (NULL: absent). */
static int value_is(const char *text, const char *section, const char *key, const char *want) {
    int rc;
    s3x_ini *ini = parse(text, &rc);
    if (rc) {
        printf("  (parse failed: %s)\n", last_msg());
        return 0;
    }
    const char *v = s3x_ini_get(ini, section, key);
    int ok = want ? (v && strcmp(v, want) == 0) : v == NULL;
    if (!ok) printf("  (%s.%s is %s%s%s)\n", section, key, v ? "\"" : "", v ? v : "absent", v ? "\"" : "");
    s3x_ini_free(ini);
    return ok;
}

/* 1 if text is refused with the code and a message holding both needles. */
static int refused(const char *text, const char *needle1, const char *needle2) {
    int rc;
    s3x_ini *ini = parse(text, &rc);
    s3x_ini_free(ini);
    const char *m = last_msg();
    int ok = rc == S3X_ECREDENTIALS && strstr(m, needle1) && (!needle2 || strstr(m, needle2));
    if (!ok) printf("  (rc %d, message \"%s\")\n", rc, rc ? m : "");
    return ok;
}

static char *repeat(char c, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        printf("FAIL cannot write %s: %s\n", path, strerror(errno));
        tap_failed++;
    }
}

/* ---- the parser ---- */

static void test_lines(void) {
    CHECK(value_is("[default]\r\naws_access_key_id = AK\r\nregion=eu-west-3\r\n", "default", "aws_access_key_id",
                   "AK"),
          "CRLF line endings: no CR in the value");
    CHECK(value_is("[default]\r\naws_access_key_id = AK\r\nregion=eu-west-3\r\n", "default", "region", "eu-west-3"),
          "CRLF: the next line too");
    CHECK(value_is("[a]\rx = 1\ry = 2\r", "a", "y", "2"), "a lone CR ends a line (Python's universal newlines)");
    CHECK(value_is("[a]\nx = last line", "a", "x", "last line"), "no newline at the end of the file");
    CHECK(value_is("[a]\nx = 1\n\n\n", "a", "x", "1"), "blank lines at the end");
    CHECK(value_is("", "a", "x", NULL), "an empty file has nothing");

    /* A comment line longer than the old 4096-byte buffer: its tail is part
     * of the comment, not a line of its own. */
    char *pad = repeat('x', 4093);
    size_t n = 64 + 5000;
    char *text = malloc(n + 200);
    snprintf(text, n + 200, "[default]\nx = 1\n# %saws_secret_access_key = HIDDEN%s\ny = 2\n", pad, pad + 4093 - 873);
    CHECK(strlen(text) > 5000 + 16, "the comment line is over 5000 bytes (%zu)", strlen(text));
    CHECK(value_is(text, "default", "aws_secret_access_key", NULL), "a key after byte 4095 of a comment is not read");
    CHECK(value_is(text, "default", "y", "2"), "the line after the long comment is read");
    free(text);
    free(pad);

    /* A value as long as a line may be, and one byte over. */
    char *big = repeat('v', S3X_INI_MAX_LINE - 4);
    text = malloc(S3X_INI_MAX_LINE + 64);
    snprintf(text, S3X_INI_MAX_LINE + 64, "[a]\nk = %s\n", big);
    CHECK(strlen("k = ") + strlen(big) == S3X_INI_MAX_LINE, "line of exactly the maximum");
    CHECK(value_is(text, "a", "k", big), "a line of exactly 65536 bytes is read whole");
    snprintf(text, S3X_INI_MAX_LINE + 64, "[a]\n\nk = %sv\n", big);
    CHECK(refused(text, "credentials file t, line 3", "longer than 65536 bytes"),
          "a line one byte over the maximum is an error naming file and line");
    snprintf(text, S3X_INI_MAX_LINE + 64, "[a]\n#%svvvv\n", big); /* 65537 bytes */
    CHECK(refused(text, "line 2", "longer"), "an over-long comment is an error too, not a split");
    free(text);
    free(big);
}

static void test_syntax(void) {
    CHECK(value_is("[a]\n  key   =   spaced value  \n", "a", "key", "spaced value"), "name and value trimmed");
    CHECK(value_is("[a]\nkey\t=\tv\n", "a", "key", "v"), "tabs trimmed");
    CHECK(value_is("[a]\nk\xc2\xa0=\xc2\xa0v\xc2\xa0\n", "a", "k", "v"), "U+00A0 trimmed like str.strip()");
    CHECK(value_is("[a]\nk = v = w\n", "a", "k", "v = w"), "the first '=' splits");
    CHECK(value_is("[a]\nk: v\n", "a", "k", "v"), "':' is a delimiter too");
    CHECK(value_is("[a]\nk = a:b\n", "a", "k", "a:b"), "a ':' in a value stays");
    CHECK(value_is("[a]\nk =\n", "a", "k", ""), "an empty value");
    CHECK(value_is("[a]\nk = v # not a comment\n", "a", "k", "v # not a comment"), "no inline comments");
    CHECK(value_is("[a]\n# k = hidden\n; k = hidden\n   # k = hidden\n", "a", "k", NULL), "comment lines");
    CHECK(value_is("[a]\nAWS_Access_Key_ID = AK\n", "a", "aws_access_key_id", "AK"), "names are case-insensitive");
    CHECK(value_is("[a]\nK\xc3\xa9y \xe6\x97\xa5 = v\n", "a", "k\xc3\xa9y \xe6\x97\xa5", "v"),
          "a name with non-ASCII bytes is found (found by fuzz_ini)");
    CHECK(value_is("[a]\nk = 1\n[b]\nk = 2\n", "a", "k", "1"), "sections are separate (a)");
    CHECK(value_is("[a]\nk = 1\n[b]\nk = 2\n", "b", "k", "2"), "sections are separate (b)");
    CHECK(value_is("[a]\nk = 1\n", "b", "k", NULL), "an absent section");
    CHECK(value_is("  [a]\nk = 1\n", "a", "k", "1"), "an indented section header");

    /* Continuation lines (a line indented deeper than its setting's). */
    CHECK(value_is("[a]\nk = 1\n  more\n", "a", "k", "1\nmore"), "an indented line continues the value");
    CHECK(value_is("[a]\ns3 =\n  addressing_style = path\nk = 2\n", "a", "addressing_style", NULL),
          "a nested setting (s3 = ...) is not a setting of the section");
    CHECK(value_is("[a]\ns3 =\n  addressing_style = path\n", "a", "s3", "\naddressing_style = path"),
          "the nested block is the value, as botocore sees it");
    CHECK(value_is("[a]\nk = 1\n\n  more\n\n", "a", "k", "1\n\nmore"), "blank lines inside a value are kept");
    CHECK(value_is("[a]\nk =\n \n\n", "a", "k", ""), "an empty value followed by blank lines stays empty (fuzz_ini)");
    CHECK(value_is("[a]\nk = 1\n# c\n  more\n", "a", "k", "1\nmore"), "a comment inside a value is skipped");
    CHECK(value_is("[a]\n  k = 1\n  j = 2\n", "a", "j", "2"), "same indent: a new setting");
    CHECK(value_is("[a]\n[b]\n  k = 1\n", "b", "k", "1"), "an indented first setting of a section");

    /* Section names: exact, everything up to the last ']'. */
    CHECK(value_is("[ default ]\nk = 1\n", "default", "k", NULL), "[ default ] is not [default] (untrimmed)");
    CHECK(value_is("[ default ]\nk = 1\n", " default ", "k", "1"), "[ default ] is \" default \"");
    CHECK(value_is("[my profile]\nk = 1\n", "my profile", "k", "1"), "a section name with a space");
    CHECK(value_is("[a]b\nk = 1\n", "a", "k", "1"), "text after ']' is ignored");
    CHECK(value_is("[a] ]\nk = 1\n", "a] ", "k", "1"), "the last ']' closes the name");

    /* [DEFAULT] settings apply to every section that exists. */
    const char *def = "[DEFAULT]\nregion = r0\nk = d\n[a]\nk = own\n";
    CHECK(value_is(def, "a", "region", "r0"), "[DEFAULT] is inherited");
    CHECK(value_is(def, "a", "k", "own"), "a section's own setting beats [DEFAULT]");
    CHECK(value_is(def, "b", "region", NULL), "[DEFAULT] does not make sections exist");
    CHECK(value_is(def, "DEFAULT", "region", NULL), "DEFAULT is not a section of its own");
    CHECK(value_is("[DEFAULT]\nx = 1\n[a]\n[DEFAULT]\ny = 2\n", "a", "y", "2"), "[DEFAULT] may be opened twice");

    /* Errors, as configparser raises them (strict). */
    CHECK(refused("[a]\nk = 1\nk = 2\n", "line 3", "repeats setting 'k' of line 2 in section [a]"),
          "a duplicate setting is an error (botocore's configparser raises DuplicateOptionError)");
    CHECK(refused("[a]\nK = 1\nk = 2\n", "line 3", "repeats setting"), "duplicates ignore case");
    CHECK(refused("[a]\nk = 1\n[b]\n[a]\nj = 2\n", "line 4", "repeats section [a] of line 1"), "a duplicate section");
    CHECK(refused("[DEFAULT]\nk = 1\n[DEFAULT]\nk = 2\n", "line 4", "repeats setting"), "a duplicate in [DEFAULT]");
    CHECK(refused("k = 1\n[a]\n", "line 1", "before any [section]"), "a setting before any section");
    CHECK(refused("\xef\xbb\xbf[a]\nk = 1\n", "line 1", "before any [section]"),
          "a UTF-8 byte order mark is not skipped (nor by Python)");
    CHECK(refused("[a]\njunk\n", "line 2", "neither a [section]"), "a line that is nothing");
    CHECK(refused("[]\n", "line 1", "before any"), "[] is not a section header");
    CHECK(refused("[a]\n= v\n", "line 2", "no name"), "a setting without a name");
    CHECK(refused("[a]\nk = \xff\n", "line 2", "not valid UTF-8"), "invalid UTF-8");
    CHECK(refused("[a]\nk = \xed\xa0\x80\n", "line 2", "not valid UTF-8"), "an encoded surrogate");
    {
        const char nul[] = "[a]\nk = a\0b\n";
        s3x_ini *ini = NULL;
        int rc = s3x_ini_parse(nul, sizeof nul - 1, "f", S3X_EINVAL, &ini);
        CHECK(rc == S3X_EINVAL && ini == NULL && strstr(last_msg(), "f, line 2: the line has a NUL byte"),
              "a NUL byte: %s", last_msg());
    }
    /* The earliest error is reported. */
    CHECK(refused("[a]\nk = 1\nk = 2\njunk\n", "line 3", NULL), "the duplicate on line 3 before the junk on line 4");
    CHECK(refused("[a]\njunk\nk = 1\nk = 2\n", "line 2", NULL), "the junk on line 2 before the duplicate on line 4");
    /* Secrets stay out of messages. */
    CHECK(refused("[a]\naws_secret_access_key = SECRETVALUE\njunk SECRETVALUE\n", "line 3", NULL) &&
              !strstr(last_msg(), "SECRETVALUE"),
          "a message does not quote the file's text");
}

static void test_profiles(void) {
    const char *cfg = "[default]\nregion = r-default\n"
                      "[profile dev]\nregion = r-dev\n"
                      "[profile   spaced  ]\nregion = r-spaced\n"
                      "[profile \"my profile\"]\nregion = r-quoted\n"
                      "[profile two words]\nregion = r-ignored\n"
                      "[profile 'it''s']\nregion = r-its\n"
                      "[profile \"unclosed]\nregion = r-unclosed\n"
                      "[prod]\nregion = r-bare\n"
                      "[profilex y]\nregion = r-y\n";
    int rc;
    s3x_ini *ini = parse(cfg, &rc);
    if (!CHECK(rc == 0, "config parses: %s", last_msg())) return;
    struct {
        const char *profile, *section;
    } cases[] = {
        {"default", "default"},
        {"dev", "profile dev"},
        {"spaced", "profile   spaced  "},      /* shlex splits on the blanks */
        {"my profile", "profile \"my profile\""}, /* quotes keep the space */
        {"two words", NULL},                    /* three words: botocore ignores the section */
        {"two", NULL},
        {"its", "profile 'it''s'"},
        {"unclosed", NULL},                     /* shlex fails: ignored */
        {"\"unclosed", NULL},
        {"prod", NULL},                         /* only [default] needs no "profile " */
        {"y", "profilex y"},                    /* botocore checks startswith("profile") */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *s = s3x_ini_profile_section(ini, cases[i].profile);
        if (cases[i].section) CHECK(s && !strcmp(s, cases[i].section), "profile '%s' -> [%s] (got %s)",
                                    cases[i].profile, cases[i].section, s ? s : "none");
        else CHECK(s == NULL, "profile '%s' has no section (got [%s])", cases[i].profile, s ? s : "");
    }
    CHECK(!strcmp(s3x_ini_get(ini, s3x_ini_profile_section(ini, "my profile"), "region"), "r-quoted"),
          "region of a quoted profile name");
    s3x_ini_free(ini);

    ini = parse("[profile default]\nregion = a\n[default]\nregion = b\n", &rc);
    const char *s = s3x_ini_profile_section(ini, "default");
    CHECK(rc == 0 && s && !strcmp(s, "default"), "[default] after [profile default]: the later wins");
    s3x_ini_free(ini);
    ini = parse("[default]\nregion = b\n[profile default]\nregion = a\n", &rc);
    s = s3x_ini_profile_section(ini, "default");
    CHECK(rc == 0 && s && !strcmp(s, "profile default"), "[profile default] after [default]: the later wins");
    s3x_ini_free(ini);
    ini = parse("[profile \"a\\\"b\"]\nk = 1\n[profile a\\ b]\nk = 2\n[profile \"c\\d\"]\nk = 3\n", &rc);
    s = s3x_ini_profile_section(ini, "a\"b");
    CHECK(rc == 0 && s && !strcmp(s, "profile \"a\\\"b\""), "\\\" inside double quotes");
    s = s3x_ini_profile_section(ini, "a b");
    CHECK(s && !strcmp(s, "profile a\\ b"), "a backslash-escaped space outside quotes");
    s = s3x_ini_profile_section(ini, "c\\d");
    CHECK(s && !strcmp(s, "profile \"c\\d\""), "other backslashes inside double quotes stay");
    s3x_ini_free(ini);
}

static void test_entries(void) {
    int rc;
    s3x_ini *ini = parse("[a]\nX = 1\n[DEFAULT]\ny = 2\n", &rc);
    const char *sec, *name, *val;
    CHECK(rc == 0 && s3x_ini_count(ini) == 2, "two settings");
    CHECK(s3x_ini_entry(ini, 0, &sec, &name, &val) == 0 && !strcmp(sec, "a") && !strcmp(name, "x") &&
              !strcmp(val, "1"),
          "entry 0 (name lowercased)");
    CHECK(s3x_ini_entry(ini, 1, &sec, &name, &val) == 0 && !strcmp(sec, "DEFAULT"), "entry 1 in DEFAULT");
    CHECK(s3x_ini_entry(ini, 2, &sec, &name, &val) == -1, "entry 2 is past the end");
    CHECK(s3x_ini_has_section(ini, "a") && !s3x_ini_has_section(ini, "DEFAULT") && !s3x_ini_has_section(ini, "b"),
          "has_section");
    s3x_ini_free(ini);
    CHECK(s3x_ini_get(NULL, "a", "x") == NULL && s3x_ini_count(NULL) == 0, "NULL ini is empty");
    s3x_ini_free(NULL);
}

static void test_load(void) {
    char path[512];
    s3x_ini *ini = (s3x_ini *)&g_dir;
    snprintf(path, sizeof path, "%s/absent", g_dir);
    int rc = s3x_ini_load(path, "shared config file", S3X_EINVAL, &ini);
    CHECK(rc == 0 && ini == NULL, "a missing file is no file");
    ini = (s3x_ini *)&g_dir;
    rc = s3x_ini_load(g_dir, "shared config file", S3X_EINVAL, &ini);
    CHECK(rc == 0 && ini == NULL, "a directory is no file (botocore: os.path.isfile)");

    /* One byte over the file limit. */
    snprintf(path, sizeof path, "%s/huge", g_dir);
    size_t n = S3X_INI_MAX_FILE + 1;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (i % 64 == 63) ? '\n' : '#';
    write_file(path, data, n);
    rc = s3x_ini_load(path, "shared config file", S3X_EINVAL, &ini);
    CHECK(rc == S3X_EINVAL && ini == NULL && strstr(last_msg(), "larger than") && strstr(last_msg(), path),
          "a file over 16 MiB is refused: %s", last_msg());
    write_file(path, data, n - 1);
    rc = s3x_ini_load(path, "shared config file", S3X_EINVAL, &ini);
    CHECK(rc == 0 && ini != NULL && s3x_ini_count(ini) == 0, "a file of exactly 16 MiB is read: %s",
          rc ? last_msg() : "");
    s3x_ini_free(ini);
    free(data);
    unlink(path);
}

/* ---- through the client ---- */

static void clear_env(void) {
    const char *vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                          "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    /* Nothing here may reach for 169.254.x.x: the chain ends at instance
     * metadata, so it is disabled, and no container endpoint is set. */
    const char *more[] = {"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                          "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ROLE_ARN"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) unsetenv(more[i]);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

/* Resolves a fresh client for profile (NULL: the default chain). */
static int resolve(const char *profile, s3x_client **out) {
    s3x_client *c = NULL;
    int rc = s3x_client_new(&c);
    if (rc) return rc;
    if (profile) s3x_client_set_string(c, S3X_CLIENT_PROFILE, profile);
    s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://127.0.0.1:1");
    rc = s3x_client_resolve(c);
    *out = c;
    return rc;
}

static void test_client(void) {
    char creds[512], config[512];
    snprintf(creds, sizeof creds, "%s/credentials", g_dir);
    snprintf(config, sizeof config, "%s/config", g_dir);
    clear_env();
    setenv("AWS_SHARED_CREDENTIALS_FILE", creds, 1);
    setenv("AWS_CONFIG_FILE", config, 1);

    /* A 10 KiB session token, read whole. */
    char *token = repeat('T', 10 * 1024);
    token[0] = 'F';
    token[10 * 1024 - 1] = 'L';
    s3x_buf b = S3X_BUF_INIT;
    s3x_buf_printf(&b, "[default]\r\naws_access_key_id = AKID\r\naws_secret_access_key = SECRET\r\n"
                       "aws_session_token = %s\r\n[my profile]\naws_access_key_id=AK2\naws_secret_access_key=SK2",
                   token);
    write_file(creds, b.data, b.len);
    const char *cfg = "[default]\nregion = eu-west-3\n[profile \"my profile\"]\nregion = ap-south-1\n";
    write_file(config, cfg, strlen(cfg));
    s3x_client *c = NULL;
    int rc = resolve(NULL, &c);
    if (CHECK(rc == 0, "resolves from the credentials file: %s", last_msg())) {
        CHECK_STREQ(c->creds->access_key, "AKID", "access key");
        CHECK_STREQ(c->creds->secret_key, "SECRET", "secret key (CRLF file)");
        CHECK(c->creds->session_token && strlen(c->creds->session_token) == 10 * 1024, "the 10 KiB token is whole (%zu bytes)",
              c->creds->session_token ? strlen(c->creds->session_token) : 0);
        CHECK(c->creds->session_token && !strcmp(c->creds->session_token, token), "the token is byte for byte the file's");
        CHECK_STREQ(s3x_client_region(c), "eu-west-3", "region from [default] of the config file");
    }
    s3x_client_free(c);
    rc = resolve("my profile", &c);
    if (CHECK(rc == 0, "a profile name with a space: %s", last_msg())) {
        CHECK_STREQ(c->creds->secret_key, "SK2", "its secret (last line without a newline)");
        CHECK(c->creds->session_token == NULL, "no token");
        CHECK_STREQ(s3x_client_region(c), "ap-south-1", "region from [profile \"my profile\"]");
    }
    s3x_client_free(c);
    s3x_buf_free(&b);

    /* aws_security_token beats aws_session_token, as in botocore. */
    const char *both = "[default]\naws_access_key_id=A\naws_secret_access_key=S\n"
                       "aws_session_token=new\naws_security_token=old\n";
    write_file(creds, both, strlen(both));
    rc = resolve(NULL, &c);
    CHECK(rc == 0 && c->creds->session_token && !strcmp(c->creds->session_token, "old"), "aws_security_token first");
    s3x_client_free(c);

    /* The key hidden after byte 4095 of a comment is not used: without it,
     * the profile has no secret and there are no credentials. */
    char *pad = repeat('#', 4095);
    s3x_buf_clear(&b);
    s3x_buf_printf(&b, "[default]\naws_access_key_id = AKID\n%saws_secret_access_key = HIDDEN%.900s\n", pad, pad);
    write_file(creds, b.data, b.len);
    rc = resolve(NULL, &c);
    CHECK(rc == S3X_ECREDENTIALS && strstr(last_msg(), "no credentials"), "hidden key not used: rc %d, %s", rc,
          last_msg());
    s3x_client_free(c);
    s3x_buf_printf(&b, "aws_secret_access_key = REAL\n");
    write_file(creds, b.data, b.len);
    rc = resolve(NULL, &c);
    CHECK(rc == 0 && !strcmp(c->creds->secret_key, "REAL"), "the real key after the long comment: %s", last_msg());
    s3x_client_free(c);

    /* An over-long line fails resolution, naming the file and the line. */
    char *big = repeat('k', S3X_INI_MAX_LINE);
    s3x_buf_clear(&b);
    s3x_buf_printf(&b, "[default]\naws_access_key_id = AKID\naws_secret_access_key = S\naws_session_token = %s\n",
                   big);
    write_file(creds, b.data, b.len);
    rc = resolve(NULL, &c);
    CHECK(rc == S3X_ECREDENTIALS && strstr(last_msg(), creds) && strstr(last_msg(), "line 4") &&
              strstr(last_msg(), "longer than 65536"),
          "over-long line in the credentials file: rc %d, %s", rc, last_msg());
    s3x_client_free(c);
    rc = resolve("other", &c);
    CHECK(rc == S3X_ECREDENTIALS && strstr(last_msg(), "line 4"), "also for an explicit profile: %s", last_msg());
    s3x_client_free(c);

    /* Credentials from the environment do not read the file at all. */
    setenv("AWS_ACCESS_KEY_ID", "ENVAK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "ENVSK", 1);
    rc = resolve(NULL, &c);
    CHECK(rc == 0 && !strcmp(c->creds->access_key, "ENVAK"), "environment credentials first: %s", last_msg());
    s3x_client_free(c);

    /* A malformed config file fails resolution when the region is read from it. */
    s3x_buf_clear(&b);
    s3x_buf_printf(&b, "[default]\nregion = eu-west-3\nregion = us-east-1\n");
    write_file(config, b.data, b.len);
    rc = resolve(NULL, &c);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), config) && strstr(last_msg(), "line 3"),
          "duplicate region in the config file: rc %d, %s", rc, last_msg());
    s3x_client_free(c);
    /* botocore reads the config file whatever the region's source (it holds
     * the endpoint settings too): a malformed one is an error all the same. */
    setenv("AWS_REGION", "us-west-2", 1);
    rc = resolve(NULL, &c);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "line 3"), "AWS_REGION: the malformed config file is still refused: %s",
          last_msg());
    s3x_client_free(c);
    s3x_buf_clear(&b);
    s3x_buf_printf(&b, "[default]\nregion = eu-west-3\n");
    write_file(config, b.data, b.len);
    rc = resolve(NULL, &c);
    CHECK(rc == 0 && !strcmp(s3x_client_region(c), "us-west-2"), "AWS_REGION over the profile's region: %s",
          last_msg());
    s3x_client_free(c);

    s3x_buf_free(&b);
    free(big);
    free(pad);
    free(token);
    unlink(creds);
    unlink(config);
    clear_env();
}

/* Nested settings ("s3 =" with indented sub-settings) and the named
 * sections ([services NAME], [sso-session NAME]), as botocore reads them. */
static void test_nested(void) {
    int rc;
    s3x_ini *ini = parse("[default]\nservices = loc\ns3 =\n  addressing_style = path\n\n  endpoint_url=http://h:1 \n"
                         "  Use_Thing = a = b\nflat = x\nbad =\n  no equals here\n"
                         "[services loc]\ns3 =\n  endpoint_url = http://svc:9\n"
                         "[sso-session 'my sso']\nsso_region = eu-west-1\n[profile  \"two words\" ]\nregion = r\n",
                         &rc);
    if (!CHECK(rc == 0 && ini, "parse: %s", last_msg())) return;
    const char *s3 = s3x_ini_get(ini, "default", "s3");
    char *v = NULL;
    size_t bad = 0;
    CHECK(s3x_ini_nested(s3, "addressing_style", &v, &bad) == 0 && v && !strcmp(v, "path"), "nested value");
    free(v);
    CHECK(s3x_ini_nested(s3, "endpoint_url", &v, &bad) == 0 && v && !strcmp(v, "http://h:1"),
          "no spaces around '=', trimmed, after a blank line");
    free(v);
    CHECK(s3x_ini_nested(s3, "Use_Thing", &v, &bad) == 0 && v && !strcmp(v, "a = b"), "splits at the first '='");
    free(v);
    CHECK(s3x_ini_nested(s3, "use_thing", &v, &bad) == 0 && v == NULL, "sub-names are case-sensitive (botocore)");
    CHECK(s3x_ini_nested(s3, "missing", &v, &bad) == 0 && v == NULL, "absent sub-setting");
    CHECK(s3x_ini_nested(s3x_ini_get(ini, "default", "flat"), "x", &v, &bad) == 0 && v == NULL,
          "a flat value is not nested");
    CHECK(s3x_ini_nested(s3x_ini_get(ini, "default", "bad"), "x", &v, &bad) == -1 && bad == 2,
          "a nested line without '=' is an error, at its line (%zu)", bad);
    const char *sect = s3x_ini_named_section(ini, "services", "loc");
    CHECK(sect && !strcmp(sect, "services loc"), "[services loc] found");
    CHECK(s3x_ini_nested(s3x_ini_get(ini, sect, "s3"), "endpoint_url", &v, &bad) == 0 && v &&
              !strcmp(v, "http://svc:9"), "the services section's s3 endpoint_url");
    free(v);
    CHECK(s3x_ini_named_section(ini, "sso-session", "my sso") != NULL, "a quoted sso-session name");
    CHECK(s3x_ini_named_section(ini, "services", "nope") == NULL, "an absent services section");
    CHECK(s3x_ini_profile_section(ini, "two words") != NULL, "profile names still split shell-like");
    s3x_ini_free(ini);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s/s3x-test-ini-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) {
        printf("FAIL mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_lines();
    test_syntax();
    test_profiles();
    test_entries();
    test_load();
    test_client();
    test_nested();
    rmdir(g_dir);
    return tap_summary("test_ini");
}
