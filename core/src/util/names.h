/* Validation of the names that reach a request's URL host or path: bucket
 * names, region names and the endpoint's host[:port] (private, libc only).
 *
 * Every name that ends up in a URL is checked here before a URL is built
 * from it, so a name can never change which host a signed request goes to
 * (a '#', '?', '@', '/' or ':' in a bucket or region would otherwise end
 * the host early or make it a user name). */
#ifndef S3X_NAMES_H
#define S3X_NAMES_H

#include <stddef.h>

/* Bucket names are accepted by the relaxed rules that legacy buckets (made in
 * us-east-1 before 2018) and several S3-compatible servers still use: 3 to
 * 255 characters from [A-Za-z0-9._-], starting and ending with a letter or
 * digit, no "..". Those characters cannot end a URL path segment or a host,
 * and the first/last rule keeps "." and ".." (dot segments) out. Returns NULL
 * when valid, else a static string saying what is wrong. */
const char *s3x_bucket_name_problem(const char *bucket);

/* 1 when the bucket can be the first label(s) of a host name, as S3's
 * current rules require for virtual-hosted addressing: 3 to 63 characters of
 * [a-z0-9.-], each dot-separated label non-empty and starting and ending
 * with a letter or digit, and not shaped like an IPv4 address. */
int s3x_bucket_dns_compatible(const char *bucket);

/* Regions are [a-z0-9-]+, 1 to 64 characters, not starting or ending with
 * '-'. Returns NULL when valid, else what is wrong. */
const char *s3x_region_problem(const char *region);

/* The authority of an endpoint URL, "host[:port]" with host a DNS name
 * ([A-Za-z0-9._-], labels not starting with '-'), an IPv4 address or a
 * bracketed IPv6 literal, and port 1..65535. n is its length. Returns NULL
 * when valid, else what is wrong. User information ("user:pass@") is refused
 * here; the caller must not echo it. */
const char *s3x_authority_problem(const char *authority, size_t n);

#endif
