/* The shared AWS config and credentials files (~/.aws/config,
 * ~/.aws/credentials), read the way botocore reads them (private).
 *
 * botocore parses both with Python's configparser.RawConfigParser (strict),
 * and this parser follows it where a difference could change which key signs
 * a request:
 * - lines end at LF, CRLF or a lone CR (Python's universal newlines); each is
 *   read whole: a line longer than S3X_INI_MAX_LINE bytes is an error, never
 *   split into two (a split let a key hidden in a long comment be used);
 * - "#" or ";" as the first non-blank character makes a comment line; there
 *   are no comments after a value ("key = v # x" has the value "v # x");
 * - "[name]" starts a section (the name is everything up to the last ']',
 *   untrimmed: "[ default ]" is not "default"); "[DEFAULT]" holds settings
 *   every section inherits;
 * - "name = value" or "name: value" (the first '=' or ':' splits), name and
 *   value trimmed of whitespace (str.strip(): Unicode spaces too); names are
 *   compared ASCII-case-insensitively (configparser lowercases them);
 * - a line indented deeper than the line that started a setting continues
 *   that setting's value (joined with '\n'; blank lines inside are kept, the
 *   end is trimmed);
 * - errors, as configparser raises them, for the whole file: a setting
 *   before any section, a line that is neither, an empty name, a section or
 *   a setting (within one section) given twice. configparser is strict: a
 *   later duplicate does not win, the file is refused, and so it is here.
 * Beyond configparser: a NUL byte or bytes that are not UTF-8 are errors (Python
 * fails to decode such a file: botocore refuses it too), and files larger
 * than S3X_INI_MAX_FILE are refused.
 *
 * Every error names the file and the line, sets the thread's last error and
 * returns the code the caller chose (S3X_ECREDENTIALS for the credentials
 * file, S3X_EINVAL for the config file), or S3X_ENOMEM. Values may be
 * secrets: they are never put in messages, and are wiped before freeing. */
#ifndef S3X_INI_H
#define S3X_INI_H
#include <stddef.h>

#define S3X_INI_MAX_LINE (64u * 1024u)
#define S3X_INI_MAX_FILE (16u * 1024u * 1024u)

typedef struct s3x_ini s3x_ini;

/* Parses data[0..len), the text of the file called name (for messages), into
 * *out (NULL after a failure). error_code is returned for a malformed file. */
int s3x_ini_parse(const char *data, size_t len, const char *name, int error_code, s3x_ini **out);

/* Reads and parses the file at path; what names the kind of file in
 * messages ("shared credentials file"). A file that does not exist, cannot
 * be opened or is not a regular file gives 0 and *out = NULL, as botocore
 * ignores such files; a read error, a file over S3X_INI_MAX_FILE or a
 * malformed one gives error_code. */
int s3x_ini_load(const char *path, const char *what, int error_code, s3x_ini **out);

/* The value of key in section, or NULL when the section does not exist or
 * has no such key (nor has [DEFAULT]). "DEFAULT" itself is not a section.
 * The pointer lives as long as ini. ini may be NULL. */
const char *s3x_ini_get(const s3x_ini *ini, const char *section, const char *key);

/* 1 if a section of that exact name exists ("DEFAULT" never does). */
int s3x_ini_has_section(const s3x_ini *ini, const char *section);

/* In a config file: the section that holds profile's settings, as botocore
 * finds it: "[default]" for "default", and "[profile NAME]", where the section
 * name starts with "profile" and splits (shell-like: quotes, backslashes) into
 * exactly two words, the second being the profile's name; when several
 * sections name the same profile the last in the file wins. NULL if none. */
const char *s3x_ini_profile_section(const s3x_ini *ini, const char *profile);

/* A section named "PREFIX NAME" (prefix "profile", "sso-session",
 * "services"), found as s3x_ini_profile_section finds profiles: the section
 * name starts with prefix and splits (shell-like) into exactly two words,
 * the second being name; the last such section wins. NULL if none. */
const char *s3x_ini_named_section(const s3x_ini *ini, const char *prefix, const char *name);

/* A nested setting, as botocore reads one: a value that starts with a
 * newline ("s3 =" followed by indented "name = value" lines) holds
 * sub-settings; each non-blank line splits at its first '=', both sides
 * trimmed, names compared exactly (botocore does not lowercase them).
 * Returns 0 with *out a malloc'd copy of the sub-setting's value (free()),
 * or NULL when the value is not nested or has no such sub-setting (a name
 * given twice: the last wins, as in botocore's dict); -1 when a line has no
 * '=' (botocore refuses the file: ConfigParseError), with *bad_line its
 * 1-based line within the value; -2 when out of memory. */
int s3x_ini_nested(const char *value, const char *sub, char **out, size_t *bad_line);

/* Settings in file order (for tests and the fuzzer): 0 and the i-th
 * setting's section ("DEFAULT" for [DEFAULT]), name (lowercased) and value,
 * or -1 when i is past the end. */
size_t s3x_ini_count(const s3x_ini *ini);
int s3x_ini_entry(const s3x_ini *ini, size_t i, const char **section, const char **name, const char **value);

/* Wipes the values and the file's text, and frees; NULL is fine. */
void s3x_ini_free(s3x_ini *ini);

#endif
