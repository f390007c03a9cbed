/* Credentials: immutable refcounted snapshots, and the provider chain that
 * finds them the way botocore does (private; docs/credentials.md is the
 * user's description and must stay true to this file and creds.c).
 *
 * A snapshot is never changed after it is made: a request signs with one
 * snapshot it holds a reference to, so a refresh that swaps the client's
 * current snapshot can never give a request a key from one set and a token
 * from another. Secrets are wiped when the last reference goes. */
#ifndef S3X_CREDS_H
#define S3X_CREDS_H
#include <stdatomic.h>

typedef struct s3x_creds {
    atomic_int refs;
    char *access_key, *secret_key, *session_token; /* token may be NULL */
    double expiry;   /* wall-clock seconds since the epoch; 0 = does not expire */
    double fetched;  /* wall-clock time it was obtained */
} s3x_creds;

/* A new snapshot (one reference) holding copies; NULL when out of memory. */
s3x_creds *s3x_creds_new(const char *access_key, const char *secret_key, const char *session_token,
                         double expiry);
s3x_creds *s3x_creds_ref(s3x_creds *c);
/* Drops a reference; the last one wipes and frees. NULL is fine. */
void s3x_creds_unref(s3x_creds *c);

/* What the chain starts from: the client's explicit settings. Strings may be
 * NULL; they are copied by s3x_cred_chain_resolve. */
typedef struct s3x_cred_settings {
    const char *access_key, *secret_key, *session_token;
    const char *profile;      /* the client's PROFILE option (explicit), or NULL */
    const char *region;       /* the client's resolved region: STS's region */
    const char *ca_bundle;    /* for STS over HTTPS */
    int verify_tls;
} s3x_cred_settings;

/* The provider that supplied a snapshot, kept to fetch fresh ones. */
typedef struct s3x_cred_source s3x_cred_source;

/* Runs the chain: explicit settings; the environment (skipped when a profile
 * is explicit); the profile's role (role_arn with source_profile or
 * credential_source, through STS AssumeRole); web identity (environment or
 * profile, through STS AssumeRoleWithWebIdentity); SSO (the profile's
 * sso_session or legacy SSO settings: the cached token, then the portal's
 * GetRoleCredentials); the shared credentials file; the profile's credential_process; the shared config file's keys;
 * the container endpoint; instance metadata (IMDSv2). The first provider
 * that is configured decides: its failure is the chain's error (botocore
 * does the same), except instance metadata, which is only tried. When none
 * is configured the error (S3X_ECREDENTIALS) names each provider and why it
 * had nothing. 0 with *src and *out set (one reference), or a negative code. */
int s3x_cred_chain_resolve(const s3x_cred_settings *s, s3x_cred_source **src, s3x_creds **out);

/* Fetches a fresh snapshot from the same provider (for refresh). */
int s3x_cred_source_fetch(s3x_cred_source *src, s3x_creds **out);

/* botocore's name for the provider: "explicit", "env", "assume-role",
 * "assume-role-with-web-identity", "shared-credentials-file",
 * "custom-process", "config-file", "container-role", "iam-role", "sso". */
const char *s3x_cred_source_name(const s3x_cred_source *src);
void s3x_cred_source_free(s3x_cred_source *src);

/* Wall-clock seconds since the epoch (credentials expire in wall time). */
double s3x_wall_now(void);

/* The refresh windows of a snapshot (botocore: advisory 15 min, mandatory
 * 10 min before expiry), scaled down for short-lived credentials so that a
 * lifetime of a few seconds still leaves part of it usable: each is the
 * smaller of botocore's window and a fraction (1/2, 1/4) of the lifetime. */
void s3x_creds_windows(const s3x_creds *c, double *advisory, double *mandatory);

/* Splits a credential_process command line as Python's shlex.split (POSIX
 * mode) does, which botocore uses: space, tab, CR and LF separate words;
 * '...' is literal; in "..." a backslash escapes only \\ and \"; outside
 * quotes a backslash makes the next character literal. There is no shell:
 * no variables, globs, pipes or ';'. 0 with a NULL-terminated
 * malloc'd argv (free with s3x_argv_free), or -1 (unbalanced quote, or no
 * word) with *why set. */
int s3x_split_command(const char *cmd, char ***argv, const char **why);
void s3x_argv_free(char **argv);

/* An environment variable's value, or NULL when unset or empty. */
const char *s3x_env_nonempty(const char *name);
/* The path in variable env, else $HOME/rel; NULL without either (malloc'd). */
char *s3x_home_path(const char *env, const char *rel);

/* The region instance metadata reports (IMDSv2 token, then
 * /latest/meta-data/placement/region; AWS_EC2_METADATA_DISABLED and
 * AWS_EC2_METADATA_SERVICE_ENDPOINT as for credentials; one attempt with 1 s
 * timeouts). 1 with out set (not validated: the caller checks it), 0 when
 * there is none (disabled, unreachable, an error), <0 out of memory. */
#include <stddef.h>
int s3x_imds_region(int verify_tls, const char *ca_bundle, char *out, size_t cap);

#endif
