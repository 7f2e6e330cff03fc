// Broken variants of the reference server for the API suite: a front that forwards every request to
// the real server and adds exactly one fault. The suite must catch each with the checks that name it
// (conformance/api/expected-failures.json). A front, not a switch inside src/server: the faults are
// at the HTTP surface, so the reference server's code carries no API faults.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { isUtf8 } from "node:buffer";
import { createHash, randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";
import { basicCredentials, seed } from "../../src/server/app.js";
import { loadConfig } from "../../src/server/config.js";
import { loadContract, mediaTypeOf, UNKNOWN_ID, UNSERVED_ZIP } from "./contract.js";
import { basicOf } from "./context.js";

export interface BrokenApi {
  id: string;
  description: string;
}

export const brokenApis = [
  { id: "wrong-type-response-field", description: "Search answers each business's reviewCount as a string." },
  { id: "500-on-malformed-json", description: "A body that is not JSON gets a 500 instead of a 400 problem." },
  { id: "no-scope-check", description: "A token works for every operation, whatever scope it was issued for." },
  { id: "no-failed-auth-throttle", description: "The token endpoint never throttles failed client authentication: every wrong secret is another 401." },
  { id: "throttles-per-address-and-client-id", description: "Failed client authentications of a client id are counted per address and client id: from two addresses, a client id gets twice its budget (D30: the client id's from every address together)." },
  { id: "throttles-per-client-id-only", description: "Failed client authentications are counted per client_id only: spread over many client ids, they are never throttled (D30's budget per address)." },
  { id: "no-basic-client-auth", description: "The token endpoint refuses HTTP Basic client authentication (client_id and client_secret required in the form)." },
  { id: "accepts-two-authentication-methods", description: "The token endpoint takes the form's credentials when HTTP Basic is sent too." },
  { id: "empty-secret-is-a-second-method", description: "HTTP Basic beside a client_secret= with no value is refused as two authentication methods (RFC 6749 §3.1: a parameter without a value is as if omitted)." },
  { id: "last-repeated-parameter-wins", description: "The token endpoint reads a repeated form parameter as its last value." },
  { id: "repairs-invalid-utf8", description: "JSON bodies are decoded leniently: bytes that are not UTF-8 become U+FFFD and the request succeeds." },
  { id: "repairs-lone-surrogates", description: "JSON strings are stored as the reference's text columns take them: a lone surrogate escape (\\ud800) becomes U+FFFD and the request succeeds." },
  { id: "scope-confusion", description: "A token issued for two or more scopes acts with every scope its client may have." },
  { id: "basic-401-without-challenge", description: "The token endpoint answers a failed HTTP Basic authentication with 401 invalid_client but no WWW-Authenticate: Basic challenge." },
  { id: "location-without-id", description: "A 201's Location names the collection (/api/v2/webhooks), not the created resource." },
  { id: "location-on-another-origin", description: "A 201's Location is absolute, on another origin (https://api.partner-platform.example), not the API's own (D35: the created resource's URI)." },
  { id: "location-with-a-query", description: "A 201's Location adds a query (?created=1) to the created resource's URI: another URI (D35)." },
  { id: "takes-credentials-from-the-query", description: "The token endpoint reads client_id and client_secret from the URL's query where the form has none (RFC 6749 §2.3.1: never in a request URI)." },
  { id: "grant-type-ignores-case", description: "The token endpoint takes grant_type in any letter case: Client_Credentials gets a token (RFC 6749 §4.4.2: client_credentials)." },
  { id: "trims-secrets", description: "The token endpoint trims the client secret of the form before comparing it (D11: compared exactly)." },
  { id: "compares-ids-as-numbers", description: "Reads ids as numbers: a category or business id with a 0 before it finds the one without (ids are strings, D17)." },
  { id: "accepts-http-webhook-urls", description: "Registers a webhook whose url is http:// as if it were https:// (D16: https only)." },
  { id: "labels-search-latin-1", description: "Labels a search's answer charset=iso-8859-1, though its bytes are UTF-8 (RFC 8259 §8.1: JSON is UTF-8)." },
  { id: "lower-cases-emails", description: "A created service request's customer e-mail is held lower-cased, not as sent." },
  { id: "trims-names", description: "A created service request's customer name is held trimmed of outer spaces, not as sent." },
  { id: "counts-lengths-in-bytes", description: "Counts a webhook secret's length in UTF-8 bytes: 15 characters of é (30 bytes) are registered (D16: code points)." },
  { id: "zip-matches-before-a-line-feed", description: "Checks zip codes with a pattern whose $ matches before a final line feed (PHP, Python): 10001 and a line feed is taken as 10001." },
  { id: "loose-email-pattern", description: "Checks e-mail addresses with a loose pattern (one @, a dot after it, no spaces): jane..doe@example.com and .jane.doe@example.com are taken (D16: RFC 5321's Mailbox, dots only between atoms)." },
  { id: "takes-any-domain-label", description: "Checks an e-mail address's domain as anything but @ and spaces: jane@under_score.example.com and jane@-example.com are taken (D16: RFC 5321's Domain, letters, digits and hyphens inside a label)." },
  { id: "takes-a-dot-after-the-domain", description: "Takes an e-mail address with a dot after its domain (jane.doe@example.com.), DNS's root, which RFC 5321's Domain does not write (D16)." },
  { id: "takes-6-digit-phones", description: "Takes a phone number of 6 digits (+123456): the pattern's lower bound is 7 (E.164 with its country code)." },
  { id: "no-email-length-limit", description: "Checks an e-mail address's format, not its length: a well-formed address of 255 characters is taken (maxLength 254)." },
  { id: "max-lengths-in-bytes", description: "Counts a customer name's and a webhook secret's maxLength in UTF-8 bytes: 200 é in a name (400 bytes) are refused with 422 (D16: code points)." },
  { id: "max-lengths-in-utf16-units", description: "Counts a customer name's and a webhook secret's maxLength in UTF-16 units (Java's String.length): 200 😀 in a name (400 units) are refused with 422 (D16: code points)." },
  { id: "ids-up-to-20-digits", description: "Takes a 20-digit categoryID as a well-formed id and answers 404 for it, where the schema allows 19 digits (D14: 422)." },
  { id: "phone-digits-unbounded", description: "Checks phone numbers with ^\\+[1-9][0-9]+$: a 16-digit number is taken (D14: E.164, 15 digits at most)." },
  { id: "spaces-dropped-from-phones", description: "Drops the spaces of a phone number before checking it: +12125 550143 is taken (D14: E.164, no spaces)." },
  { id: "phone-starts-with-0", description: "Checks phone numbers with ^\\+[0-9]{2,15}$: +0… is taken (D14: E.164's country code starts with 1 to 9)." },
  { id: "https-in-any-case", description: "Registers a webhook whose url starts HTTPS:// (the schema's pattern is ^https://, case-sensitive)." },
  { id: "trims-event-names", description: 'Trims the event names of a registration before reading them: "lead.created\\n" and " lead.created" subscribe to lead.created (D16: nothing is trimmed).' },
  { id: "reads-signed-zip-codes", description: "Reads zip codes as Go's Atoi does: +1000 and -1000 are five characters and a number, taken as 01000 in a search's query and a service request's body (D14: digits alone)." },
  { id: "answers-reads-in-plain-text", description: "GET on a 201's Location answers the router's own 404, text/plain (D35: a 404 problem)." },
  { id: "unknown-category-matches-nothing-where-none-serve", description: "A service request for an unknown category at a zip code no business serves gets 201 unmatched, not 404 (D13: the category does not exist)." },
  { id: "fails-on-nul-in-text", description: "Stores text in PostgreSQL as it comes: a U+0000 in a customer's name or a webhook's secret is answered 500 (D13: client input never causes a 5xx)." },
  { id: "lockout-revokes-tokens", description: "Revokes the tokens a client holds when D30's throttle locks it out: anyone who knows a client id logs its partner out with 10 wrong secrets (D30: token requests are refused, live tokens keep working)." },
  { id: "caps-tokens-over-all-clients", description: "Keeps D32's cap of 100 live tokens over every client together: issuing the 101st of anyone's revokes the oldest of anyone's, another partner's too (D32: one cap per client)." },
  { id: "revoked-tokens-still-register-webhooks", description: "Registers webhooks with a token D32's cap revoked: that operation's code path checks whose the token is, not whether it was revoked (D32: refused with 401 from then on)." },
  { id: "hands-back-tokens-by-scope-only", description: "Hands back a live token for the same scopes whichever client asks: a second client is handed the first one's token (D23, D32: a client's own)." },
  { id: "event-names-in-any-case", description: "Takes event names in any letter case: LEAD.CREATED subscribes to lead.created (D16: one of the eight names)." },
  { id: "hints-the-secret-in-a-header", description: "A registered webhook's 201 has a header X-Webhook-Secret-Hint with the secret's last 8 characters (D16: never returned, nor a part)." },
  { id: "returns-the-secret-in-base64", description: "A registered webhook is answered with a secretRef member: its secret in base64 (D16: never returned, in no form)." },
  { id: "returns-the-secret-escaped", description: "A registered webhook is answered with a secretRef member: its secret with every character written as a JSON \\u escape, the same string to any JSON parser (D16: never returned, in no form)." },
  { id: "returns-the-secret-reversed", description: "A registered webhook is answered with a secretCheck member: its secret reversed (D16: never returned, in no form)." },
  { id: "hints-the-secret-in-upper-case", description: "A registered webhook's 201 has a header X-Secret-Hint with the secret's first 6 characters in upper case (D16: never returned, nor a part, in no form)." },
  { id: "scopes-ignore-case", description: "Takes scopes in any letter case: a token requested for DEMAND::SEARCH is issued for demand::search (RFC 6749 §3.3: compared exactly)." },
  { id: "tokens-ignore-case", description: "Looks bearer tokens up without regard to letter case: a real token with its letters swapped is taken for it." },
  { id: "tokens-match-by-prefix", description: "Looks bearer tokens up by their start: a real token with characters added is taken for it (tokens are compared exactly)." },
  { id: "tokens-match-their-start", description: "Takes a bearer token that is the start of a real one (8 characters or more): a real token cut short is taken for it (tokens are compared exactly)." },
  { id: "bearer-scheme-case-sensitive", description: "Takes a bearer token only after Bearer written so: bearer <token> gets 401 (RFC 9110 §11.1: auth schemes are case-insensitive)." },
  { id: "basic-scheme-case-sensitive", description: "Takes HTTP Basic client authentication only after Basic written so: basic <credentials> is no client authentication (RFC 9110 §11.1: auth schemes are case-insensitive)." },
  { id: "401-says-insufficient-scope", description: "Answers a forged token's 401 with a Bearer challenge whose error is insufficient_scope, where RFC 6750 §3.1 has invalid_token." },
  { id: "rewrites-webhook-urls", description: "Answers a registered webhook's url as a URL parser writes it again (host lower-cased, / for an empty path), not as sent (D28: never silently rewritten)." },
  { id: "normalizes-names-to-nfc", description: "Holds a service request's customer name normalized to Unicode NFC: a decomposed é is answered composed (D17: held as sent)." },
  { id: "secrets-match-by-prefix", description: "Compares a client secret by its start: the secret with its last character left out (4 characters or more of it) gets a token (D11: compared exactly)." },
  { id: "takes-tab-separated-scopes", description: "Splits the scope parameter on any whitespace (Ruby's split(' '), awk): demand::search and demand::request joined by a tab are issued for both (RFC 6749 §3.3: one space between scope tokens, a tab is no scope character)." },
  { id: "lenient-base64", description: "Decodes an HTTP Basic header's base64 leniently, skipping characters base64 does not have (Ruby's Base64.decode64): valid credentials followed by !! get a token (D31: not well-formed Basic is invalid_request)." },
  { id: "basic-credentials-not-form-decoded", description: "Takes an HTTP Basic header's client id and secret as they are after base64, not form-decoded: a client whose secret has a reserved character, sent as %HH, is refused (RFC 6749 §2.3.1, D31)." },
  { id: "charset-case-sensitive", description: "Refuses a JSON body labelled charset=UTF-8 with 415: only charset=utf-8 in lower case is taken (D29: utf-8 in any case; RFC 9110 §8.3.2: charset names are case-insensitive)." },
  { id: "takes-comma-separated-scopes", description: "Reads a scope parameter's commas as separators: demand::search,demand::request is issued for both (RFC 6749 §3.3: separated by spaces)." },
  { id: "api-takes-basic-credentials", description: "The API operations take the client's credentials as HTTP Basic in place of a bearer token (§5.1, D13: a bearer token)." },
  { id: "leads-for-every-category", description: "Matches a service request to every business that serves its zip code, whatever its category: an electrician gets a plumbing customer's lead (D17: those that serve the category)." },
  { id: "throttle-skips-basic", description: "A throttled client authenticating with HTTP Basic and its right secret gets a token: the throttle is looked at on the form's path alone (D30: every token request for that client_id)." },
  { id: "token-repairs-invalid-utf8", description: "The token endpoint decodes its form leniently: bytes that are not UTF-8 become U+FFFD and the request gets its token (D29: invalid_request)." },
  { id: "token-ignores-charset", description: "The token endpoint reads a form labelled charset=iso-8859-1 as UTF-8 and issues the token (D29: invalid_request)." },
  { id: "token-charset-case-sensitive", description: "The token endpoint refuses a form labelled charset=UTF-8 with invalid_request: only utf-8 in lower case is taken (D29: any case)." },
  { id: "issues-tokens-over-get", description: "The token endpoint answers GET too, its parameters read from the query: a client's secret in a URL gets a token (RFC 6749 §3.2: POST only)." },
  { id: "accepts-json-suffix-types", description: "A body sent as any application/…+json type (application/merge-patch+json) is taken as application/json (D13: 415)." },
  { id: "takes-utf8-as-a-charset", description: "A JSON body whose Content-Type names charset=utf8 is taken as UTF-8, though utf8 is no registered name of it (D29: utf-8 in any case, else 415)." },
  { id: "ignores-characters-after-json", description: "Reads a JSON body's first value and ignores what follows it (Go's json.Decoder): a body with } after its object is taken (D13: 400)." },
  { id: "takes-raw-control-characters", description: "Takes a raw tab inside a JSON string as if escaped (a lenient parser; RFC 8259 §7: control characters must be escaped; D13: 400)." },
  { id: "takes-unknown-escapes", description: "Takes an escape JSON does not have (\\q) as the character after the backslash (a lenient parser; RFC 8259 §7; D13: 400)." },
  { id: "accepts-json-prefixed-types", description: "A body sent as application/json-seq or application/jsonp is taken as application/json: the media type is matched by its start (D13: 415)." },
  { id: "one-lead-id-for-all", description: "Every lead of every service request has the id 1 (D14: each lead its own id)." },
  { id: "created-at-in-local-time", description: "A created resource's createdAt is the server's local time (UTC-5) written with Z: five hours before it was created (D14)." },
  { id: "500-on-null-member", description: "A JSON body with a member that is null gets a 500: the code reads a member of it." },
  { id: "500-on-empty-bearer", description: "Authorization: Bearer with no token after it gets a 500: the code reads a token that is not there (D13: no token is 401, client input never causes a 5xx)." },
  { id: "trims-grant-type", description: "Trims the spaces around grant_type: \" client_credentials \" gets a token (RFC 6749 §4.4.2: the value MUST be client_credentials)." },
  { id: "reads-x-json-types", description: "Reads a body sent as application/x-json or text/x-json as JSON (D13: another content type is 415)." },
  { id: "reads-query-numbers-as-numbers", description: "Compares query values as numbers, as Perl's == does: zip=10001.0 and category_id=1000123e0 are taken (D14: digits alone, so 400)." },
  { id: "basic-challenge-without-realm", description: "Answers a failed HTTP Basic authentication with WWW-Authenticate: Basic and no realm (RFC 7617 §2: realm is required; D31)." },
  { id: "invalid-utf8-problem-without-errors", description: "Answers a body that is not UTF-8 with a 400 problem without errors[] (D29: errors: [{pointer: \"\"}])." },
  { id: "500-on-array-parameters", description: "A query parameter named with [] after it (PHP's and Rails' array syntax) gets a 500: the code reads the array as a string (D13: client input never causes a 5xx)." },
  { id: "reads-array-parameters", description: "Reads a query parameter named name[] as name: a search whose category_id comes only as category_id[] is answered as if it had come (another parameter's name, so the required one is missing: 400, D13)." },
  { id: "500-on-malformed-percent-escapes", description: "A query with a percent sign not followed by two hex digits (%zz) gets a 500: the decoder throws (D13: client input never causes a 5xx)." },
  { id: "500-on-numbers-beyond-double-range", description: "A JSON body with a number beyond a double's range (1e400) gets a 500: the parser reads it as Infinity, which the code cannot handle (D13)." },
  { id: "500-on-5000-digit-integers", description: "A JSON body with an integer of more than 4,300 digits gets a 500: Python's int() refuses to convert it (D13)." },
  { id: "refuses-escaped-surrogate-pairs", description: "A surrogate pair written as two JSON escapes (\\ud83d\\ude00, one character) is refused with 400 as two lone surrogates (D29: only a lone one is malformed)." },
  { id: "decodes-queries-twice", description: "Decodes a query's values twice: zip=1000%2531 is read as 10001 (D13: a value is percent-decoded once)." },
  { id: "reads-nan-and-infinity", description: "Reads NaN and Infinity in a JSON body as numbers, then refuses them with 422, where the body is not JSON (D13: RFC 8259 as written, 400)." },
  { id: "500-on-deep-nesting", description: "A JSON body nested 1,000 arrays deep or more gets a 500: the parser recurses and overflows its stack (D13: client input never causes a 5xx)." },
  { id: "counts-lengths-in-utf16-units", description: "Counts a string's length in UTF-16 units (Java's String.length): a secret of 8 emoji is 16 long (D16: code points)." },
  { id: "trims-query-values", description: "Trims the spaces around each query parameter of a search before reading it: a zip code with a space before it is taken (D13: an invalid query parameter is 400)." },
  { id: "reads-zip-plus-four", description: "Reads a ZIP+4 (10001-1234) as its five-digit zip code, in a search's query and a service request's body (D14: five-digit US zip codes)." },
  { id: "digits-in-any-script", description: "Matches [0-9] with any Unicode digit (Java's and .NET's Unicode classes): a zip code in Arabic-Indic digits is taken (D16: ECMA-262 patterns, [0-9] is ASCII)." },
  { id: "member-names-ignore-case", description: "Binds JSON member names without regard to letter case: ZIPCODE beside zipCode is taken for it, not refused as a member the closed body does not have (D16)." },
  { id: "limit-16-kib", description: "Request bodies over 16 KiB get 413, where the contract allows 64 KiB." },
  { id: "no-limit-when-chunked", description: "The body limit is read from Content-Length only: a chunked body of any size is accepted." },
  { id: "no-live-token-cap", description: "Every token issued keeps working: issuing more never revokes a client's oldest (D32)." },
  { id: "cap-per-scope-set", description: "Caps a client's live tokens per set of scopes: a token of one scope outlives 100 newer tokens of every scope (D32: 100 per client)." },
  { id: "unknown-category-matches-nothing", description: "A service request for a category that does not exist is stored as unmatched (201) instead of refused with 404 (D13)." },
  { id: "unknown-business-forbidden", description: "A registration for a business that does not exist gets 403 business-forbidden instead of 404 not-found (D16, D27)." },
  { id: "search-unknown-category-404", description: "A search that finds nothing answers 404 not-found instead of 200 with an empty list (D17)." },
  { id: "search-ignores-category", description: "A search answers the businesses that serve the zip code in any category, whatever category was asked for (D17)." },
  { id: "search-ignores-zip", description: "A search answers the category's businesses wherever they serve: where none serves the zip code, those of the example's (D17: the businesses that serve the category at the zip code)." },
  { id: "matching-ignores-zip", description: "A service request is matched to the category's businesses wherever they serve: where none serves its zip code, to those of the example's (D17: whose service area contains the zip code)." },
  { id: "search-ignores-unknown-category", description: "A search for a category that does not exist drops the category and answers the businesses of the zip code (D17: an empty list)." },
  { id: "throttles-address-after-100-failures", description: "The token endpoint throttles an address after 100 failed authentications a minute, where D30's budget is 300." },
  { id: "returns-the-secret", description: "A registered webhook is answered with the secret it was registered with (D16: never returned)." },
  { id: "hints-the-secret-in-4-characters", description: "A registered webhook is answered with a secretEnding member: the last 4 characters of its secret, as consoles show a key's (D16: never returned, nor a part)." },
  { id: "json-depth-limit-of-8", description: "Its JSON parser refuses bodies nested deeper than 8 levels (400 malformed-request): D13 asks for a limit of 64 or more." },
  { id: "masks-the-secret-but-2-at-each-end", description: "A registered webhook is answered with a secretMask member: the secret's first 2 and last 2 characters, * for each of the others (D16: never returned, nor a part)." },
  { id: "hints-the-secret-in-4-bytes", description: "A registered webhook is answered with a secretHint member: the first and last 4 bytes of its secret's UTF-8, as Go slices a string, a character cut in two written as U+FFFD (D16: never returned, nor a part)." },
  { id: "hints-the-secret-in-3-characters", description: "A registered webhook is answered with a secretHint member: \"…\" and the last 3 characters of its secret (D16: never returned, nor a part)." },
  { id: "returns-a-digest-of-the-secret", description: "A registered webhook is answered with a secretFingerprint member: sha256: and the SHA-256 of its secret in hex, which for a secret longer than 64 bytes is the HMAC key itself (D16: never returned, nor a digest)." },
  { id: "returns-a-secret-hint", description: "A registered webhook is answered with a secretHint member: the first 8 characters of its secret (D16: never returned)." },
  { id: "unescaped-pointers", description: "Writes errors[].pointer by joining member names with / as they are: a member named secret~/v2 is /secret~/v2, not /secret~0~1v2 (RFC 6901 §3)." },
  { id: "quotes-the-secret-in-problems", description: "A refused registration's problem quotes the secret that was sent in its detail (D16: never returned)." },
  { id: "answers-another-customer", description: "A created service request is answered with the customer of the request before it: one partner's customer shown to another (D17)." },
  { id: "registers-for-another-business", description: "A registered webhook is answered as one for business 4713, not the business asked for (D17)." },
  { id: "creates-webhooks-disabled", description: "A registered webhook is answered with status disabled (D17: enabled)." },
  { id: "location-under-another-path", description: "A 201's Location names the id under the other operation's path (/api/v4/requests/{webhookID}), not the created resource's URI (D35)." },
  { id: "reuses-ids", description: "Every created resource of an operation is answered with the id 1, and a Location ending in it (D14, D35)." },
  { id: "matched-without-leads", description: "A service request is answered matched when it has no leads and unmatched when it has some (D17)." },
  { id: "search-worst-rated-first", description: "Search answers its businesses worst rated first (D17: best rated first)." },
  {
    id: "lists-each-match-twice",
    description:
      "A join that yields a row per service-area match: the search lists each business twice, and a service request makes two leads for each business (D17: the businesses that serve the category at the zip code; one lead per matched business).",
  },
  { id: "tokens-say-60-seconds", description: "Token responses say expires_in 60, where tokens live 3600 seconds (D11)." },
  {
    id: "grants-scopes-the-client-may-not-have",
    description:
      "Checks the scopes a token request asks for against the API's, not the client's: a client asking for a scope it may not have gets a token that lists it (the front asks for the client's own scopes and answers with those asked for) (D11, D12: invalid_scope).",
  },
  { id: "grants-scopes-not-asked", description: "Token responses list every scope of the API in scope, whatever was asked for and granted (D11)." },
  { id: "insufficient-scope-as-business-forbidden", description: "A token without the operation's scope gets a 403 whose problem type is business-forbidden, not insufficient-scope (D13)." },
  { id: "scope-challenge-not-bearer", description: "A token without the operation's scope gets a 403 whose WWW-Authenticate is a Basic challenge naming the scope, not RFC 6750's Bearer error=\"insufficient_scope\"." },
  { id: "reads-created-resources", description: "GET on a created resource's Location, or on its collection, answers 200 with JSON, where this version has no such operation (D9, D35)." },
  { id: "accepts-text-json", description: "A body sent as text/json is taken as application/json (D13: 415)." },
  { id: "reads-bodies-without-content-type", description: "A JSON operation's body sent with no Content-Type is read as JSON (D13: 415, nothing says it is JSON)." },
  { id: "ignores-charset", description: "A JSON body whose Content-Type names charset=iso-8859-1 is taken as UTF-8 (D29: 415)." },
  { id: "refuses-unknown-token-parameters", description: "A token request with a parameter the endpoint does not know gets 400 invalid_request (RFC 6749 §3.2: ignored)." },
  { id: "requires-scope-parameter", description: "A token request without scope gets 400 invalid_scope (D11: every scope the client may have)." },
  { id: "empty-scope-is-invalid", description: "A token request with scope= and no value gets 400 invalid_scope (RFC 6749 §3.1: a parameter without a value is as if omitted; D11: every scope the client may have)." },
  { id: "basic-refuses-same-client-id", description: "HTTP Basic with a client_id parameter naming the same client gets 400 invalid_request (D31: allowed)." },
  { id: "basic-ignores-other-client-id", description: "HTTP Basic with a client_id parameter naming another client gets a token for the Basic client (D31: 400 invalid_request)." },
  { id: "names-the-first-error-only", description: "A 422's errors names only the first failing member, where D13 wants every one." },
  { id: "names-the-first-two-errors-only", description: "A 422's errors names only the first two failing members (a cap on its length), where D13 wants every one." },
  { id: "malformed-basic-is-invalid-client", description: "An Authorization header that is not well-formed Basic gets 401 invalid_client, a failed authentication (D31: 400 invalid_request)." },
  { id: "secrets-ignore-case", description: "Client secrets sent in the form are compared without regard to letter case (a case-insensitive collation): a secret in another case gets a token." },
  {
    id: "trusts-any-x-forwarded-for",
    description:
      "Takes the client's address from the first X-Forwarded-For address of any sender (Express's trust proxy = true), where D30 reads it only from the proxies named: a client that writes a new address into each request is never throttled per address.",
  },
  {
    id: "client-ids-ignore-case",
    description:
      "Client ids are looked up without regard to letter case (a case-insensitive collation), where D11 compares them exactly: a client id in another case, with the client's secret, gets that client's token.",
  },
  { id: "basic-failures-not-counted", description: "Failed HTTP Basic authentications of unknown client ids never count toward D30's budgets: guessing through Basic is never throttled." },
  {
    id: "address-budget-counts-unknown-clients-only",
    description: "Wrong secrets of a client that exists count toward its own budget of D30 but not its address's: guesses spread over many real client ids from one address are never throttled.",
  },
  {
    id: "real-clients-get-twice-the-budget",
    description: "A client that exists gets 20 wrong secrets a window before D30's throttle, made-up client ids 10 (a tweak not to lock real partners out so fast).",
  },
  { id: "real-clients-failures-not-counted", description: "Wrong secrets of a client that exists never count toward D30's budget (only unknown client ids' do): a real client's secret can be guessed without end." },
  { id: "success-resets-failure-count", description: "A client's successful token request resets its count of failed authentications (D30: successes count for neither budget): wrong secrets between the right ones are never throttled." },
  { id: "right-secret-passes-the-throttle", description: "A throttled client, or a client at a throttled address, that sends its right secret gets a token (D30: the right secret included), so guessing goes on at full speed and a right guess shows." },
  { id: "counts-successes-per-address", description: "Counts successful token requests toward their address's budget of failed authentications: an address is throttled after 300 token requests a minute, successes among them (D30: successes count for neither budget)." },
  {
    id: "counts-throttled-requests-per-address",
    description:
      "Counts token requests answered 429 (a throttled client id's) toward their address's budget of failed authentications: requests for a locked-out client id lock its address out too (D30: a 429 counts for neither budget).",
  },
  { id: "retry-after-always-60", description: "A throttled token request's Retry-After is always 60, however much of D30's window is left: it does not count down." },
  {
    id: "throttle-window-of-5-seconds",
    description: "D30's budget per client id is counted in windows of 5 seconds, not 60: ten failures a minute are taken, as long as they come apart.",
  },
  {
    id: "retry-after-half-the-window-left",
    description: "A throttled token request's Retry-After is half the seconds left in D30's window: a client that waits as it says is refused again.",
  },
  { id: "throttles-address-after-295-failures", description: "The token endpoint throttles an address after 295 failed authentications a minute, a few before D30's budget of 300." },
  { id: "tokens-die-after-30-seconds", description: "A token is refused (401 invalid_token) once it is 30 s old, though expires_in says 3600 (D11)." },
  {
    id: "rate-limits-with-an-http-date",
    description: "The first request to each operation gets 429 with Retry-After as an HTTP-date 2 s ahead (RFC 9110 allows it; the contract's 429 says seconds, D13).",
  },
] as const satisfies readonly BrokenApi[];

/** Fronts that change the reference server's answers only in ways the contract allows: the suite must certify each. */
export const legalApis = [
  { id: "other-partners-businesses", description: "Businesses with ids of one to three characters belong to another partner: registering a webhook for one is 403 business-forbidden (D27)." },
  { id: "rate-limited", description: "The first request to each operation gets 429 with Retry-After: 1 (D18: rate limits are the deployment's)." },
  {
    id: "limits-token-requests-per-address",
    description:
      "A rate limit of the deployment (D18): more than 100 token requests from one address without a second's pause, successful or not, get 429 with Retry-After: 1. D30's budget per address cannot be seen under it.",
  },
  {
    id: "limits-failed-authentications-in-bursts",
    description:
      "A rate limit of the deployment (D18) on failures only: more than 100 failed token requests from one address without a second's pause get 429 with Retry-After: 1; successful ones are never limited. D30's budget per address cannot be seen under it.",
  },
  {
    id: "answers-in-its-own-form",
    description:
      "Answers as the contract allows in forms of its own: a webhook's events in reverse order, a member the schema does not have first in every created resource (partnerID) and in a service request's customer, a 201's Location relative to the request's URI with its id's first digit percent-encoded (webhooks/%33…, RFC 9110 §10.2.2, RFC 3986 §6.2.2.2), a DPoP challenge before the Bearer one of a 401 and 403 (in one line) and before the Basic one of the token endpoint's 401 (in two), and a 403 Bearer challenge without its error attribute, and a 422's detail with words of its own that generated secrets hold too (propertyIsEnumerable, constructor, …) (D13, D16, D35).",
  },
  {
    id: "limits-token-requests-in-bursts-of-5",
    description:
      "A rate limit of the deployment (D18): more than 5 token requests from one address without a second's pause, successful or not, get 429 with Retry-After: 1. The suite's token requests wait it out; D30's budget per address cannot be seen under it.",
  },
  {
    id: "refuses-one-token-request-in-15",
    description:
      "A rate limit of the deployment (D18) that counts requests, not time: every 15th token request, whichever client or address it comes from, gets 429 with Retry-After: 1, and the next is taken. D30's budget per address cannot be seen under it.",
  },
  {
    id: "refuses-one-token-request-in-6-of-a-client",
    description:
      "A rate limit of the deployment (D18) that counts each client id's token requests, not time: every 6th, right secret or wrong, gets 429 with Retry-After: 1, and the next is taken.",
  },
  {
    id: "http-layer-refuses-malformed-request-targets",
    description:
      "Its HTTP layer refuses a request-target with a malformed percent-escape (%zz) itself, 400 in text/html, before the API reads it (the JDK's HttpServer does): the request is not valid HTTP (RFC 9112 §3, D13).",
  },
  {
    id: "throttle-windows-aligned-to-the-clock",
    description:
      "D30's budget per client id is counted in fixed windows aligned to the clock's minutes: a throttled request's Retry-After is the seconds to the minute's end, less than 60 less the seconds since the client id's first failure.",
  },
  {
    id: "real-client-window-ends-mid-try",
    description:
      "D30's per-client windows for a client that exists are fixed, and one ends at its 5th wrong secret: its first 10 in a row are not throttled, the next ones are once 10 fall in the new window (a window aligned to the clock may end at any moment).",
  },
  {
    id: "throttle-window-ends-mid-check",
    description:
      "D30's windows are fixed, and one ends between a made-up client id's 4th and 5th failed authentication: that id's budget starts again in the next window (a window aligned to the clock may end at any moment of a check).",
  },
  {
    id: "hands-back-live-tokens",
    description:
      "A successful token request of a client that holds a live token of the same scopes is answered with that token, its lifetime renewed, instead of a new one (D32: nothing new is issued, so nothing is revoked).",
  },
  {
    id: "behind-one-address",
    description: "A proxy in front, as Docker's published ports are: the implementation sees every request come from one address, so D30's budget per address counts the suite's requests from all its addresses together.",
  },
  {
    id: "appends-x-forwarded-for",
    description:
      "A reverse proxy in front that appends each request's peer address to its X-Forwarded-For (as nginx's $proxy_add_x_forwarded_for does), the implementation trusting that proxy alone (serve --trust-proxy 127.0.0.1): the client's address is the last one the proxy names, whatever the client wrote before it (D30).",
  },
] as const satisfies readonly BrokenApi[];

export type BrokenApiId = (typeof brokenApis)[number]["id"] | (typeof legalApis)[number]["id"];

interface Forwarded {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length"]);

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A token a front hands out in place of the reference's: the reference's it stands for now, and how it was asked for. */
interface KeptToken {
  current: string;
  asked: { headers: Record<string, string>; body: Buffer };
}

/** A replacement for withFormParam: what `change` makes of a value, where that differs from it. */
const changedBy =
  (change: (sent: string) => string) =>
  (sent: string): string | undefined => {
    const changed = change(sent);
    return changed !== sent ? changed : undefined;
  };

/** A query parameter named name[] (PHP's and Rails' array syntax), the name before the brackets in group 1. */
const arrayParameter = (flags: string) => new RegExp(String.raw`([?&][^=&]*?)(\[\]|%5B%5D)=`, flags);

/** How a token request asked, to ask the reference again for a token of the same client and scopes. */
function askedAs(req: IncomingMessage, body: Buffer): KeptToken["asked"] {
  const headers: Record<string, string> = { "content-type": String(req.headers["content-type"]) };
  if (req.headers.authorization) headers.authorization = req.headers.authorization;
  return { headers, body };
}

/** The credentials of a token request: HTTP Basic's, else the form's. */
function credentialsOf(req: IncomingMessage, body: Buffer): { clientId: string; clientSecret: string; basic: boolean } {
  const basic = basicCredentials(req.headers.authorization);
  if (typeof basic === "object") return { ...basic, basic: true };
  const form = new URLSearchParams(body.toString("utf8"));
  return { clientId: form.get("client_id") ?? "", clientSecret: form.get("client_secret") ?? "", basic: false };
}

/** The bearer token a request carries, if any. */
const bearerOf = (req: IncomingMessage): string | undefined => /^Bearer (.+)$/i.exec(req.headers.authorization ?? "")?.[1];
/** Whether a request authenticates with HTTP Basic (well-formed or not). */
const sendsBasic = (req: IncomingMessage): boolean => /^Basic /i.test(req.headers.authorization ?? "");

/** The client id of a token request: HTTP Basic's, else the form's. */
const clientIdOf = (req: IncomingMessage, body: Buffer): string => credentialsOf(req, body).clientId;

const parses = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/** A lenient parser's reading: where the text is not JSON and `repair` makes JSON of it, the repaired text. */
const whereMalformed =
  (repair: (text: string) => string) =>
  (text: string): string => {
    if (parses(text)) return text;
    const repaired = repair(text);
    return parses(repaired) ? repaired : text;
  };

/**
 * Fronts that read a JSON request body more leniently than the contract: the text they forward in its
 * place (the reference then answers the lenient reading: a 201 where the contract says 422).
 */
const lenientReadings: Partial<Record<BrokenApiId, (text: string) => string>> = {
  "accepts-http-webhook-urls": (text) => text.replace(/("url"\s*:\s*")http:\/\//, "$1https://"),
  "counts-lengths-in-bytes": (text) => text.replace(/("secret"\s*:\s*")((?:é){1,15})"/, (_, start: string, short: string) => `${start}${short}${"x".repeat(16 - [...short].length)}"`),
  "zip-matches-before-a-line-feed": (text) => text.replace(/("\d{5})\\n"/g, "$1\""),
  // An address the loose pattern /^[^@\s]+@[^@\s]+\.[^@\s]+$/ takes though RFC 5321 does not: taken as the example's.
  "loose-email-pattern": (text) =>
    text.replace(/("email"\s*:\s*")([^"@\s]+@[^"@\s]+\.[^"@\s]+)"/, (whole, start: string, address: string) => (/^\.|\.\.|\.@|@\./.test(address) ? `${start}jane.doe@example.com"` : whole)),
  // A domain checked as "anything but @ and spaces": a label with _ or starting with - taken as the example's.
  "takes-any-domain-label": (text) => text.replace(/("email"\s*:\s*")([^"@\s]+@[^"@\s]+)"/, (whole, start: string, address: string) => (/@-|@.*_/.test(address) ? `${start}jane.doe@example.com"` : whole)),
  // Python's json.loads: NaN and Infinity read as numbers (then refused by the schema: 422, not 400).
  "reads-nan-and-infinity": (text) => text.replace(/:(\s*)-?(NaN|Infinity)\b/g, ":$10"),
  // A domain may end with a dot (DNS's root): taken as the example's address.
  "takes-a-dot-after-the-domain": (text) => text.replace(/("email"\s*:\s*")([^"@\s]+@[^"@\s]+\.)"/, '$1jane.doe@example.com"'),
  // E.164's digits counted from 6: a 6-digit number taken as the example's.
  "takes-6-digit-phones": (text) => text.replace(/("phone"\s*:\s*")\+[1-9][0-9]{5}"/, '$1+12125550143"'),
  // Any address longer than maxLength 254 taken as the example's: no length limit beside the format.
  "no-email-length-limit": (text) => text.replace(/("email"\s*:\s*")([^"]{255,})"/, '$1jane.doe@example.com"'),
  "ignores-characters-after-json": whereMalformed((text) => {
    for (let end = text.length - 1; end > 0; end--) if (parses(text.slice(0, end))) return text.slice(0, end);
    return text;
  }),
  "takes-raw-control-characters": whereMalformed((text) => text.replace(/[\u0000-\u001f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)),
  "takes-unknown-escapes": whereMalformed((text) => text.replace(/\\([^"\\/bfnrtu])/g, "$1")),
  "ids-up-to-20-digits": (text) => text.replace(/("categoryID"\s*:\s*")\d{20}"/, `$1${UNKNOWN_ID}"`),
  "phone-digits-unbounded": (text) => text.replace(/("phone"\s*:\s*"\+[1-9])(\d{15,})"/, (_, start: string, digits: string) => `${start}${digits.slice(0, 14)}"`),
  "spaces-dropped-from-phones": (text) => text.replace(/("phone"\s*:\s*")([+\d ]+)"/, (_, start: string, phone: string) => `${start}${phone.replace(/ /g, "")}"`),
  "phone-starts-with-0": (text) => text.replace(/("phone"\s*:\s*"\+)0/, "$11"),
  "https-in-any-case": (text) => text.replace(/("url"\s*:\s*")https:\/\//i, "$1https://"),
  "event-names-in-any-case": (text) => text.replace(/("events"\s*:\s*\[)([^\]]*)\]/, (_, start: string, names: string) => `${start}${names.toLowerCase()}]`),
  "counts-lengths-in-utf16-units": (text) =>
    text.replace(/("secret"\s*:\s*")((?:\u{1F600}){1,15})"/u, (whole, start: string, short: string) => ([...short].length * 2 >= 16 ? `${start}${short}${"x".repeat(16 - [...short].length)}"` : whole)),
  "digits-in-any-script": (text) => text.replace(/[\u0660-\u0669]/g, (d) => String(d.codePointAt(0)! - 0x660)),
  "reads-zip-plus-four": (text) => text.replace(/("zipCode"\s*:\s*")(\d{5})-\d{4}"/, '$1$2"'),
  // Go's Atoi, Java's parseInt: a sign and four digits is a number of five characters, written back with a 0.
  "reads-signed-zip-codes": (text) => text.replace(/("zipCode"\s*:\s*")[+-](\d{4})"/, '$10$2"'),
  "trims-event-names": (text) =>
    text.replace(/("events"\s*:\s*\[)([^\]]*)\]/, (_, start: string, names: string) => `${start}${names.replace(/"(?:\s|\\n)+/g, '"').replace(/(?:\s|\\n)+"/g, '"')}]`),
  "member-names-ignore-case": (text) => {
    // A member whose name is another's in other letters is bound to that one (other bodies go on as sent).
    let rebound = false;
    const bind = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(bind);
      if (v === null || typeof v !== "object") return v;
      const out: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(v)) {
        const bound = Object.keys(v).find((k) => k.toLowerCase() === name.toLowerCase()) ?? name;
        rebound ||= bound !== name;
        out[bound] = bind(value);
      }
      return out;
    };
    try {
      const read = JSON.stringify(bind(JSON.parse(text)));
      return rebound ? read : text;
    } catch {
      return text;
    }
  },
};

/** Token requests from one address a front lets through (a rate limit of the deployment, D18), or failed authentications before it throttles the address. */
const addressLimits: Partial<Record<BrokenApiId, number>> = {
  "limits-token-requests-per-address": 100,
  "limits-token-requests-in-bursts-of-5": 5,
  "limits-failed-authentications-in-bursts": 100,
  "throttles-address-after-100-failures": 100,
  "throttles-address-after-295-failures": 295,
};

/**
 * Fixed windows of D30's kind, one per key: a key's window opens at `startOf(at)` when it has none open
 * (at its first counted request, or aligned to the clock), lasts `ms`, and counts what the key spent in it.
 */
class Windows {
  readonly #open = new Map<string, { start: number; count: number }>();
  constructor(
    readonly ms: number,
    readonly startOf: (at: number) => number = (at) => at,
  ) {}
  /** The key's window open at `at`, if any. */
  peek(key: string, at: number): { start: number; count: number } | undefined {
    const window = this.#open.get(key);
    return window && at - window.start < this.ms ? window : undefined;
  }
  /** The key's window open at `at`, or a new one. */
  at(key: string, at: number): { start: number; count: number } {
    return this.peek(key, at) ?? this.restart(key, at);
  }
  /** A new window for the key, from `at`. */
  restart(key: string, at: number): { start: number; count: number } {
    const window = { start: this.startOf(at), count: 0 };
    this.#open.set(key, window);
    return window;
  }
  /** A 429's `Retry-After` at `at`: the whole seconds left of `window`, at least 1. */
  retryAfter(window: { start: number }, at: number): string {
    return String(Math.max(1, Math.ceil((window.start + this.ms - at) / 1000)));
  }
}

/** The token endpoint's answer to a failed client authentication, as the reference writes it; `basic`: the client tried HTTP Basic, so the answer challenges it (RFC 6749 §5.2). */
/** How deep a JSON text nests its arrays and objects (brackets inside strings not counted). */
function depthOf(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") deepest = Math.max(deepest, ++depth);
    else if (c === "]" || c === "}") depth--;
  }
  return deepest;
}

function refuseClient(res: ServerResponse, basic = false): void {
  const challenge: Record<string, string> = basic ? { "www-authenticate": 'Basic realm="partner-platform"' } : {};
  res.writeHead(401, { "content-type": "application/json", "cache-control": "no-store", ...challenge }).end(JSON.stringify({ error: "invalid_client", error_description: "Client authentication failed." }));
}

/** An RFC 6749 §5.2 error of the token endpoint. */
function oauthError(res: ServerResponse, status: number, error: string, description: string): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" }).end(JSON.stringify({ error, error_description: description }));
}

/** Starts a front on 127.0.0.1 (port 0) that forwards to `upstream` with the fault `id`. */
export async function startBrokenApi(upstream: string, id: BrokenApiId): Promise<{ url: string; close(): Promise<void> }> {
  const contract = loadContract();
  const token = contract.tokenOperation;
  const search = contract.apiOperations.find((o) => o.operationId === "searchBusinesses")!;
  const create = contract.apiOperations.find((o) => o.operationId === "createServiceRequest")!;
  const knownCategory = (create.successExamples[0]!.body as { categoryID: string }).categoryID;
  const knownZip = (create.successExamples[0]!.body as { zipCode: string }).zipCode;
  /** no-scope-check: each token issued → a token of the same client with every scope it may have. */
  const widened = new Map<string, string>();
  /**
   * no-live-token-cap, cap-per-scope-set: each token issued → how it was asked for, its client and scopes,
   * how many of those were issued up to it, and the reference's token it stands for now.
   */
  const kept = new Map<string, KeptToken & { set: string; number: number }>();
  const issuedPerSet = new Map<string, number>();
  const keepsTokens = id === "no-live-token-cap" || id === "cap-per-scope-set";
  /**
   * Sends a request on with the reference's token that `held` stands for now; where the reference has
   * revoked it (its cap counts every token it issued), asks it again as that token was first asked for.
   */
  const forwardKeptAlive = async (req: IncomingMessage, body: Buffer, held: KeptToken): Promise<Forwarded> => {
    const answer = await forward(req, body, { authorization: `Bearer ${held.current}` });
    if (answer.status !== 401) return answer;
    held.current = (await askedAgain(held.asked)) ?? held.current;
    return forward(req, body, { authorization: `Bearer ${held.current}` });
  };
  /** A new token of the reference, asked for as `asked` was (undefined if it refuses). */
  const askedAgain = async (asked: KeptToken["asked"]): Promise<string | undefined> => {
    const again = await request(`${upstream}${token.path}`, { method: "POST", ...asked });
    return ((await again.body.json()) as { access_token?: string }).access_token;
  };

  /**
   * Forwarded from the address each request came from (a loopback one), so the reference's budget per
   * address (D30) counts it as the client's. behind-one-address and appends-x-forwarded-for: from the
   * front's own (the latter names the client in X-Forwarded-For, for a reference that trusts the front).
   * trusts-any-x-forwarded-for: from a loopback address of its own for each first X-Forwarded-For
   * address a request names, as if the reference took that for the client's.
   */
  const fromAddress = new Map<string, Agent>();
  const namedAddresses = new Map<string, string>();
  const dispatcherFor = (req: IncomingMessage) => {
    if (id === "behind-one-address" || id === "appends-x-forwarded-for") return undefined;
    let address = req.socket.remoteAddress ?? "127.0.0.1";
    const named = id === "trusts-any-x-forwarded-for" ? String(req.headers["x-forwarded-for"] ?? "").split(",")[0]!.trim() : "";
    if (named) {
      if (!namedAddresses.has(named)) namedAddresses.set(named, `127.251.${Math.floor(namedAddresses.size / 250)}.${1 + (namedAddresses.size % 250)}`);
      address = namedAddresses.get(named)!;
    }
    if (!fromAddress.has(address)) fromAddress.set(address, new Agent({ localAddress: address }));
    return fromAddress.get(address)!;
  };

  async function forward(req: IncomingMessage, body: Buffer, headers: Record<string, string> = {}): Promise<Forwarded> {
    const outgoing: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(name) && name !== "host" && value !== undefined) outgoing[name] = Array.isArray(value) ? value.join(", ") : value;
    }
    if (id === "appends-x-forwarded-for") {
      const peer = req.socket.remoteAddress ?? "127.0.0.1";
      outgoing["x-forwarded-for"] = outgoing["x-forwarded-for"] ? `${outgoing["x-forwarded-for"]}, ${peer}` : peer;
    }
    const response = await request(`${upstream}${req.url}`, {
      method: req.method as "GET",
      headers: { ...outgoing, ...headers },
      ...(body.length > 0 ? { body } : {}),
      dispatcher: dispatcherFor(req),
    });
    return { status: response.statusCode, headers: response.headers, body: Buffer.from(await response.body.arrayBuffer()) };
  }

  /** Forwards a token request with a form parameter replaced by what `replace` makes of it; undefined (not forwarded) where it makes nothing. */
  async function withFormParam(req: IncomingMessage, body: Buffer, name: string, replace: (sent: string) => string | undefined): Promise<Forwarded | undefined> {
    const form = new URLSearchParams(body.toString("utf8"));
    const sent = form.get(name);
    const replacement = sent === null ? undefined : replace(sent);
    if (replacement === undefined) return undefined;
    form.set(name, replacement);
    return forward(req, Buffer.from(form.toString()));
  }

  /** Forwards a token request with its client id (`sent`'s, HTTP Basic's or the form's) replaced by `clientId`. */
  function withClientId(req: IncomingMessage, body: Buffer, sent: ReturnType<typeof credentialsOf>, clientId: string): Promise<Forwarded> {
    if (sent.basic) return forward(req, body, { authorization: basicOf(clientId, sent.clientSecret) });
    const form = new URLSearchParams(body.toString("utf8"));
    form.set("client_id", clientId);
    return forward(req, Buffer.from(form.toString()));
  }

  /** Forwards a token request whose form secret `matches` its client's, but is not it, with the client's own; undefined otherwise. */
  function withLooseSecret(req: IncomingMessage, body: Buffer, matches: (sent: string, real: string) => boolean): Promise<Forwarded | undefined> {
    const client = clients.find((c) => c.clientId === clientIdOf(req, body));
    return withFormParam(req, body, "client_secret", (sent) => (client && sent !== client.clientSecret && matches(sent, client.clientSecret) ? client.clientSecret : undefined));
  }

  function reply(res: ServerResponse, answer: Forwarded): void {
    for (const [name, value] of Object.entries(answer.headers)) {
      if (!HOP_BY_HOP.has(name) && value !== undefined) res.setHeader(name, value);
    }
    res.writeHead(answer.status).end(answer.body);
  }

  const register = contract.apiOperations.find((o) => o.operationId === "registerWebhook")!;
  const windowMs = (contract.failedAuthThrottle?.windowSeconds ?? 60) * 1000;
  /** The fronts of addressLimits: what each address spent in its window (a burst's of a second). */
  const perAddress = new Windows(id.startsWith("throttles-address-after-") ? 60_000 : 1000);
  /** The reference's clients (any other client id is unknown). */
  const clients = loadConfig().clients;
  const knownClients = new Set(clients.map((c) => c.clientId));
  /** throttle-window-ends-mid-check: requests per unknown client id, and when the front's windows began (at the first 5th). */
  const requestsOf = new Map<string, number>();
  let windowsFrom: number | undefined;
  /** The token fronts: every token the reference issued through the front, when, to which client, and how it was asked for. */
  const issued = new Map<string, { at: number; clientId: string; asked: KeptToken["asked"] }>();
  /** Forwards a token request, and keeps the token issued. */
  const issuing = async (req: IncomingMessage, body: Buffer): Promise<Forwarded> => {
    const answer = await forward(req, body);
    if (answer.status === 200) {
      const token = String((JSON.parse(answer.body.toString("utf8")) as { access_token?: unknown }).access_token);
      issued.set(token, { at: performance.now(), clientId: credentialsOf(req, body).clientId, asked: askedAs(req, body) });
    }
    return answer;
  };
  /** lockout-revokes-tokens: the tokens revoked by a lock-out. */
  const revokedTokens = new Set<string>();
  /** hands-back-live-tokens: per client and scope set, the token it was handed, and the reference's it stands for now. */
  const liveTokens = new Map<string, KeptToken & { handedOut: string }>();
  /** real-client-window-ends-mid-try, address-budget-counts-unknown-clients-only: each real client's wrong secrets so far, and its window. */
  const realFailureCount = new Map<string, number>();
  const realWindows = new Windows(windowMs);
  /** real-clients-get-twice-the-budget: the wrong secrets of each real client the front refused itself, in a window of D30's length. */
  const extraFailures = new Windows(windowMs);
  /** success-resets-failure-count, real-clients-failures-not-counted: a real client's wrong secrets, counted by the front. */
  const realFailures = new Map<string, number>();
  /** throttles-per-client-id-only: failed authentications per client id, and its budget. */
  const failuresOf = new Map<string, number>();
  const perClientId = contract.failedAuthThrottle?.perClientId ?? Infinity;
  const limitedOnce = new Set<string>();
  /** refuses-one-token-request-in-15: the token requests so far; …-in-6-of-a-client: each client id's. */
  let tokenRequests = 0;
  const tokenRequestsOf = new Map<string, number>();
  /** throttle-windows-aligned-to-the-clock, throttle-window-of-5-seconds: failed authentications per client id, in windows aligned to the clock. */
  const alignedMs = id === "throttle-window-of-5-seconds" ? 5000 : windowMs;
  const failuresInWindow = new Windows(alignedMs, (at) => at - (at % alignedMs));
  /** throttle-skips-basic: each client's last token answer. */
  const lastTokenAnswer = new Map<string, Forwarded>();
  /** leads-for-every-category: leads the front made up, counted for their ids. */
  let madeUpLeads = 0;
  /** answers-another-customer: the customer of the service request created before. */
  let lastCustomer: unknown;
  const problem = (res: ServerResponse, status: number, slug: string, detail: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): void =>
    void res
      .writeHead(status, { "content-type": "application/problem+json", ...headers })
      .end(JSON.stringify({ type: contract.problem(slug).type, title: slug, status, detail, ...extra }));

  /** The 500 of a server whose code threw on the input. */
  const crash = (res: ServerResponse, detail: string): void =>
    void res
      .writeHead(500, { "content-type": "application/problem+json" })
      .end(JSON.stringify({ type: "about:blank", title: "Internal Server Error", status: 500, detail }));

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const path = (req.url ?? "").split("?")[0]!;
    const isToken = req.method === token.method && path === token.path;
    const registering = req.method === register.method && path === register.path;
    const creating = req.method === create.method && path === create.path;
    if (id === "refuses-one-token-request-in-15" && isToken && ++tokenRequests % 15 === 0) {
      return problem(res, 429, "rate-limited", "Too many requests.", {}, { "retry-after": "1", "cache-control": "no-store" });
    }
    if (id === "refuses-one-token-request-in-6-of-a-client" && isToken) {
      const clientId = credentialsOf(req, body).clientId;
      const n = (tokenRequestsOf.get(clientId) ?? 0) + 1;
      tokenRequestsOf.set(clientId, n);
      if (n % 6 === 0) return problem(res, 429, "rate-limited", "Too many requests.", {}, { "retry-after": "1", "cache-control": "no-store" });
    }
    if ((id === "throttle-windows-aligned-to-the-clock" || id === "throttle-window-of-5-seconds") && isToken) {
      // The budget per client id counted here; a failure forwarded under a made-up client id of its own, so
      // that the reference counts it for the address alone.
      const sent = credentialsOf(req, body);
      const now = Date.now();
      const window = failuresInWindow.at(sent.clientId, now);
      if (window.count >= perClientId) {
        return problem(res, 429, "rate-limited", "Too many failed client authentications.", {}, { "retry-after": failuresInWindow.retryAfter(window, now), "cache-control": "no-store" });
      }
      const client = clients.find((c) => c.clientId === sent.clientId);
      // Only a plain client id is replaced: one the reference refuses for its form keeps that answer.
      if ((client && sent.clientSecret === client.clientSecret) || !/^[\w.~-]{1,64}$/.test(sent.clientId)) return reply(res, await forward(req, body));
      const answer = await withClientId(req, body, sent, `aligned-${randomBytes(6).toString("hex")}`);
      if (answer.status === 401) window.count++;
      return reply(res, answer);
    }
    if ((id === "counts-successes-per-address" || id === "counts-throttled-requests-per-address") && isToken) {
      // Each success (each 429) counted as a failure of its address: a failed authentication of a made-up client id sent on from it.
      const answer = await forward(req, body);
      if (answer.status === (id === "counts-successes-per-address" ? 200 : 429)) {
        const form = new URLSearchParams({ grant_type: "client_credentials", client_id: `counted-${randomBytes(6).toString("hex")}`, client_secret: "counted" });
        await request(`${upstream}${token.path}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form.toString(), dispatcher: dispatcherFor(req) }).then((r) => r.body.dump());
      }
      return reply(res, answer);
    }
    if ((id === "retry-after-half-the-window-left" || id === "retry-after-always-60") && isToken) {
      const answer = await forward(req, body);
      const retryAfter = Number(answer.headers["retry-after"]);
      if (answer.status === 429 && retryAfter > 1) answer.headers["retry-after"] = id === "retry-after-always-60" ? "60" : String(Math.ceil(retryAfter / 2));
      return reply(res, answer);
    }
    if (id === "500-on-empty-bearer" && !isToken && /^Bearer\s*$/i.test(req.headers.authorization ?? "")) return crash(res, "Cannot read properties of undefined (reading 'length').");
    if (id === "trims-grant-type" && isToken) {
      const answer = await withFormParam(req, body, "grant_type", changedBy((sent) => sent.trim()));
      if (answer) return reply(res, answer);
    }
    if (id === "reads-x-json-types" && /^(application|text)\/x-json\b/i.test(String(req.headers["content-type"] ?? ""))) {
      return reply(res, await forward(req, body, { "content-type": "application/json" }));
    }
    if (id === "reads-query-numbers-as-numbers" && !isToken && req.url!.includes("?")) {
      // Perl's ==: 10001.0 and 10001e0 are 10001 (digits alone are left as they are, leading zeros too).
      const query = new URL(req.url!, "http://front").searchParams;
      for (const [name, value] of [...query]) if (/^\d+(\.\d+)?(e[+-]?\d+)?$/i.test(value) && !/^\d+$/.test(value)) query.set(name, String(Number(value)));
      req.url = `${path}?${query}`;
    }
    if (id === "basic-challenge-without-realm" && isToken) {
      const answer = await forward(req, body);
      if (typeof answer.headers["www-authenticate"] === "string") answer.headers["www-authenticate"] = answer.headers["www-authenticate"].replace(/^Basic realm="[^"]*"/, "Basic");
      return reply(res, answer);
    }
    if (id === "invalid-utf8-problem-without-errors" && !isToken && body.length > 0 && !isUtf8(body)) {
      const answer = await forward(req, body);
      if (answer.status === 400) {
        const { errors: _dropped, ...rest } = JSON.parse(answer.body.toString("utf8")) as Record<string, unknown>;
        answer.body = Buffer.from(JSON.stringify(rest));
      }
      return reply(res, answer);
    }
    if (id === "throttle-skips-basic" && isToken) {
      // A client's last token answer kept; a 429 to its right secret in HTTP Basic answered with it instead.
      const answer = await forward(req, body);
      const sent = credentialsOf(req, body);
      const right = clients.some((c) => c.clientId === sent.clientId && c.clientSecret === sent.clientSecret);
      if (answer.status === 200) lastTokenAnswer.set(sent.clientId, answer);
      const kept = lastTokenAnswer.get(sent.clientId);
      return reply(res, answer.status === 429 && sent.basic && right && kept ? kept : answer);
    }
    if ((id === "max-lengths-in-bytes" || id === "max-lengths-in-utf16-units") && (creating || registering)) {
      const length = (text: unknown) => (typeof text !== "string" ? 0 : id === "max-lengths-in-bytes" ? Buffer.byteLength(text) : text.length);
      const sent = (parses(body.toString("utf8")) ? JSON.parse(body.toString("utf8")) : {}) as { customer?: { name?: unknown }; secret?: unknown } | null;
      const [pointer, max, text] = creating ? ["/customer/name", 200, sent?.customer?.name] : ["/secret", 256, sent?.secret];
      if (length(text) > max) return problem(res, 422, "validation-failed", "The body does not match the schema.", { errors: [{ pointer, detail: `must NOT have more than ${max} characters` }] });
    }
    if (id === "token-repairs-invalid-utf8" && isToken) return reply(res, await forward(req, Buffer.from(body.toString("utf8"))));
    if (id === "token-ignores-charset" && isToken && /charset=iso-8859-1/i.test(String(req.headers["content-type"]))) {
      return reply(res, await forward(req, body, { "content-type": mediaTypeOf(req.headers["content-type"]) }));
    }
    if (id === "token-charset-case-sensitive" && isToken && /charset=utf-8/i.test(String(req.headers["content-type"])) && !/charset=utf-8/.test(String(req.headers["content-type"]))) {
      return oauthError(res, 400, "invalid_request", "Unsupported charset.");
    }
    if (id === "issues-tokens-over-get" && req.method === "GET" && path === token.path) {
      // The query read as the form of a POST.
      const form = (req.url ?? "").split("?")[1] ?? "";
      return reply(res, await forward(Object.assign(req, { method: token.method, url: path }), Buffer.from(form), { "content-type": "application/x-www-form-urlencoded" }));
    }

    if ((id === "rate-limited" || id === "rate-limits-with-an-http-date") && !limitedOnce.has(`${req.method} ${path}`)) {
      limitedOnce.add(`${req.method} ${path}`);
      const retryAfter = id === "rate-limited" ? "1" : new Date(Date.now() + 2_000).toUTCString();
      return problem(res, 429, "rate-limited", "Too many requests.", {}, { "retry-after": retryAfter, ...(path === token.path ? { "cache-control": "no-store" } : {}) });
    }
    if (id === "takes-tab-separated-scopes" && isToken) {
      const answer = await withFormParam(req, body, "scope", (scope) => (/\s/.test(scope.replace(/ /g, "")) ? scope.split(/\s+/).filter(Boolean).join(" ") : undefined));
      if (answer) return reply(res, answer);
    }
    if (id === "lenient-base64" && isToken && sendsBasic(req)) {
      const [scheme, encoded = ""] = String(req.headers.authorization).trim().split(/\s+/, 2);
      const cleaned = encoded.replace(/[^A-Za-z0-9+/=]/g, "");
      if (cleaned !== encoded) return reply(res, await forward(req, body, { authorization: `${scheme} ${cleaned}` }));
    }
    if (id === "basic-credentials-not-form-decoded" && isToken && sendsBasic(req)) {
      // The parts as they came, handed on form-encoded: the reference reads them as they came. A header
      // that is not well-formed goes on as it is.
      const encoded = String(req.headers.authorization).trim().split(/\s+/)[1] ?? "";
      const decoded = Buffer.from(encoded, "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      if (colon > 0 && Buffer.from(decoded).toString("base64") === encoded) return reply(res, await forward(req, body, { authorization: basicOf(decoded.slice(0, colon), decoded.slice(colon + 1)) }));
    }
    if (id === "charset-case-sensitive" && !isToken && body.length > 0) {
      const charset = /;\s*charset=([^;\s]+)/i.exec(String(req.headers["content-type"] ?? ""))?.[1];
      if (charset !== undefined && charset !== "utf-8") return problem(res, 415, "unsupported-media-type", `charset=${charset} is not supported; send charset=utf-8.`);
    }
    if (id === "takes-comma-separated-scopes" && isToken) {
      const answer = await withFormParam(req, body, "scope", (scope) => (scope.includes(",") ? scope.replace(/,/g, " ") : undefined));
      if (answer) return reply(res, answer);
    }
    // An Authorization field whose scheme is not written as these fronts expect reads as none.
    if (id === "bearer-scheme-case-sensitive" && !isToken && /^bearer /i.test(req.headers.authorization ?? "") && !/^Bearer /.test(req.headers.authorization ?? "")) {
      delete req.headers.authorization;
      return reply(res, await forward(req, body));
    }
    if (id === "basic-scheme-case-sensitive" && isToken && sendsBasic(req) && !/^Basic /.test(req.headers.authorization ?? "")) {
      delete req.headers.authorization;
      return reply(res, await forward(req, body));
    }
    if (id === "api-takes-basic-credentials" && !isToken && sendsBasic(req)) {
      // The credentials exchanged for a token of every scope the client may have, behind the caller's back.
      const token = await forward(
        { ...req, method: "POST", url: contract.tokenOperation.path, headers: { "content-type": "application/x-www-form-urlencoded", authorization: req.headers.authorization } } as IncomingMessage,
        Buffer.from("grant_type=client_credentials"),
      );
      const issued = token.status === 200 ? (JSON.parse(token.body.toString("utf8")) as { access_token: string }).access_token : undefined;
      if (issued) return reply(res, await forward(req, body, { authorization: `Bearer ${issued}` }));
    }
    if (id === "grants-scopes-the-client-may-not-have" && isToken) {
      const client = clients.find((c) => c.clientId === clientIdOf(req, body));
      const asked = new URLSearchParams(body.toString("utf8")).get("scope")?.split(" ").filter(Boolean) ?? [];
      const own = asked.filter((s) => client?.scopes.includes(s));
      if (client && own.length < asked.length && asked.every((s) => contract.scopes.includes(s))) {
        const answer = (await withFormParam(req, body, "scope", () => own.join(" ")))!;
        if (answer.status === 200) answer.body = Buffer.from(JSON.stringify({ ...(JSON.parse(answer.body.toString("utf8")) as object), scope: asked.join(" ") }));
        return reply(res, answer);
      }
    }
    if (id === "scopes-ignore-case" && isToken) {
      const answer = await withFormParam(req, body, "scope", changedBy((scope) => scope.toLowerCase()));
      if (answer) return reply(res, answer);
    }
    if (id === "tokens-ignore-case" || id === "tokens-match-by-prefix" || id === "tokens-match-their-start") {
      if (isToken) return reply(res, await issuing(req, body));
      const bearer = bearerOf(req);
      const real =
        bearer === undefined
          ? undefined
          : [...issued.keys()].find((t) =>
              id === "tokens-ignore-case" ? t.toLowerCase() === bearer.toLowerCase() : id === "tokens-match-by-prefix" ? bearer.startsWith(t) : bearer.length >= 8 && t.startsWith(bearer),
            );
      return reply(res, await forward(req, body, real ? { authorization: `Bearer ${real}` } : {}));
    }
    if (id === "fails-on-nul-in-text" && !isToken && body.toString("utf8").includes("\\u0000")) {
      // PostgreSQL's "invalid byte sequence for encoding UTF8: 0x00", answered as a crash.
      return crash(res, "invalid byte sequence for encoding UTF8: 0x00");
    }
    if (id === "lockout-revokes-tokens") {
      // A client locked out (D30) loses the tokens it holds too.
      if (!isToken) {
        const bearer = bearerOf(req);
        return reply(res, await forward(req, body, bearer !== undefined && revokedTokens.has(bearer) ? { authorization: `Bearer ${bearer}-revoked` } : {}));
      }
      const answer = await issuing(req, body);
      const clientId = credentialsOf(req, body).clientId;
      if (answer.status === 429) for (const [t, held] of issued) if (held.clientId === clientId) revokedTokens.add(t);
      return reply(res, answer);
    }
    if (id === "caps-tokens-over-all-clients") {
      // D32's cap kept over the tokens of every client together: the oldest of anyone's is revoked.
      if (isToken) return reply(res, await issuing(req, body));
      const bearer = bearerOf(req);
      const newest = [...issued.keys()].slice(-(contract.liveTokensPerClient ?? 100));
      const revoked = bearer !== undefined && issued.has(bearer) && !newest.includes(bearer);
      return reply(res, await forward(req, body, revoked ? { authorization: `Bearer ${bearer}-revoked` } : {}));
    }
    if (id === "revoked-tokens-still-register-webhooks") {
      if (isToken) return reply(res, await issuing(req, body));
      const answer = await forward(req, body);
      const asked = registering ? issued.get(bearerOf(req) ?? "")?.asked : undefined;
      if (answer.status !== 401 || !asked) return reply(res, answer);
      // A code path of its own that checks a token's client, not whether it was revoked: a new token of that client in its place.
      const renewed = await askedAgain(asked);
      return reply(res, renewed ? await forward(req, body, { authorization: `Bearer ${renewed}` }) : answer);
    }
    if (id === "tokens-die-after-30-seconds") {
      if (isToken) return reply(res, await issuing(req, body));
      const bearer = bearerOf(req);
      const at = bearer === undefined ? undefined : issued.get(bearer)?.at;
      return reply(res, await forward(req, body, at !== undefined && performance.now() - at > 30_000 ? { authorization: `Bearer ${bearer}-expired` } : {}));
    }
    if (id === "hands-back-live-tokens" || id === "hands-back-tokens-by-scope-only") {
      // The client's token is the first the reference issued it for these scopes; each request with it is
      // sent on with the newest the reference issued (which its cap keeps alive), as one token renewed would be.
      if (!isToken) {
        const bearer = bearerOf(req);
        const held = [...liveTokens.values()].find((t) => t.handedOut === bearer);
        return reply(res, held ? await forwardKeptAlive(req, body, held) : await forward(req, body));
      }
      const answer = await forward(req, body);
      if (answer.status !== 200) return reply(res, answer);
      const issued = JSON.parse(answer.body.toString("utf8")) as { access_token: string; scope?: string };
      // hands-back-tokens-by-scope-only: one token per set of scopes, whichever client asks.
      const scopes = (issued.scope ?? "").split(" ").sort().join(" ");
      const key = id === "hands-back-tokens-by-scope-only" ? scopes : `${credentialsOf(req, body).clientId} ${scopes}`;
      const held = liveTokens.get(key) ?? { handedOut: issued.access_token, current: issued.access_token, asked: askedAs(req, body) };
      liveTokens.set(key, { ...held, current: issued.access_token });
      return reply(res, { ...answer, body: Buffer.from(JSON.stringify({ ...issued, access_token: held.handedOut })) });
    }
    if (id === "other-partners-businesses" && req.method === register.method && path === register.path) {
      const businessID = (() => {
        try {
          return (JSON.parse(body.toString("utf8")) as { businessID?: unknown }).businessID;
        } catch {
          return undefined;
        }
      })();
      if (typeof businessID === "string" && businessID.length <= 3 && req.headers.authorization) {
        const answer = await forward(req, body);
        // Only where the reference would have registered it or found no such business: auth and validation come first.
        if (answer.status !== 201 && answer.status !== 404) return reply(res, answer);
        return problem(res, 403, "business-forbidden", `Business ${businessID} is not one this client acts for.`, { errors: [{ pointer: "/businessID", detail: "another partner's business" }] });
      }
    }
    if (id === "limit-16-kib" && body.length > 16 * 1024) return problem(res, 413, "payload-too-large", "The body exceeds 16 KiB.");
    // The front reads the whole body; the reference would refuse it, so what it forwards is the JSON without the padding.
    if (id === "no-limit-when-chunked" && req.headers["transfer-encoding"] === "chunked" && mediaTypeOf(req.headers["content-type"]) === "application/json") {
      return reply(res, await forward(req, Buffer.from(body.toString("utf8").trimEnd())));
    }
    if (id === "basic-401-without-challenge" && isToken) {
      const answer = await forward(req, body);
      if (answer.status === 401) delete answer.headers["www-authenticate"];
      return reply(res, answer);
    }

    if (id === "no-failed-auth-throttle" && isToken) {
      const answer = await forward(req, body);
      if (answer.status !== 429) return reply(res, answer);
      return refuseClient(res);
    }
    if (id in addressLimits && isToken) {
      const address = req.socket.remoteAddress ?? "";
      const burst = !id.startsWith("throttles-address-after-");
      const now = Date.now();
      const window = perAddress.at(address, now);
      // The burst limit ends after a second without requests, however slowly the burst came (a machine
      // under load takes more than a second for 100), so the suite meets it in every run.
      if (burst) window.start = now;
      if (window.count >= addressLimits[id]!) {
        return problem(res, 429, "rate-limited", "Too many requests from this address.", {}, { "retry-after": perAddress.retryAfter(window, now), "cache-control": "no-store" });
      }
      const answer = await forward(req, body);
      // The general limit counts every request; the early throttle only failed authentications.
      if (id.startsWith("limits-token-requests-") || answer.status === 401) window.count++;
      return reply(res, answer);
    }
    if (id === "takes-credentials-from-the-query" && isToken && req.url!.includes("?")) {
      // The query's parameters added to the form where it lacks them, forwarded as one form with no query.
      const form = new URLSearchParams(body.toString("utf8"));
      for (const [name, value] of new URL(req.url!, "http://front").searchParams) if (!form.has(name)) form.set(name, value);
      req.url = path;
      return reply(res, await forward(req, Buffer.from(form.toString())));
    }
    if (id === "grant-type-ignores-case" && isToken) {
      const answer = await withFormParam(req, body, "grant_type", changedBy((sent) => sent.toLowerCase()));
      if (answer) return reply(res, answer);
    }
    if (id === "trims-secrets" && isToken) {
      const answer = await withFormParam(req, body, "client_secret", changedBy((sent) => sent.trim()));
      if (answer) return reply(res, answer);
    }
    if (id === "secrets-match-by-prefix" && isToken) {
      // A secret a client's starts with, 4 characters or more, is taken as that client's.
      const answer = await withLooseSecret(req, body, (sent, real) => sent.length >= 4 && real.startsWith(sent));
      if (answer) return reply(res, answer);
    }
    if (id === "secrets-ignore-case" && isToken) {
      // A secret matching a client's in any letter case is taken as that client's.
      const answer = await withLooseSecret(req, body, (sent, real) => sent.toLowerCase() === real.toLowerCase());
      if (answer) return reply(res, answer);
    }
    if (id === "client-ids-ignore-case" && isToken) {
      // A client id matching a client's in any letter case is taken as that client's.
      const sent = credentialsOf(req, body);
      const client = clients.find((c) => c.clientId !== sent.clientId && c.clientId.toLowerCase() === sent.clientId.toLowerCase());
      if (client) return reply(res, await withClientId(req, body, sent, client.clientId));
    }
    if ((id === "real-client-window-ends-mid-try" || id === "address-budget-counts-unknown-clients-only") && isToken) {
      // The front is D30's per-client throttle for clients that exist: the reference never sees their wrong
      // secrets as theirs.
      const sent = credentialsOf(req, body);
      const client = clients.find((c) => c.clientId === sent.clientId);
      if (client) {
        const at = performance.now();
        const open = realWindows.peek(client.clientId, at);
        if (open && open.count >= perClientId) {
          return problem(res, 429, "rate-limited", "Too many failed client authentications.", {}, { "retry-after": realWindows.retryAfter(open, at), "cache-control": "no-store" });
        }
        if (sent.clientSecret !== client.clientSecret) {
          const failures = (realFailureCount.get(client.clientId) ?? 0) + 1;
          realFailureCount.set(client.clientId, failures);
          // real-client-window-ends-mid-try: the first window ends at the 5th wrong secret; windows of D30's length from then on.
          const midTry = failures === 5 && id === "real-client-window-ends-mid-try";
          (midTry ? realWindows.restart(client.clientId, at) : realWindows.at(client.clientId, at)).count++;
          if (id === "address-budget-counts-unknown-clients-only") return refuseClient(res, sent.basic);
          // Counted for the address as any failure is: sent on as an unknown client id of its own each time,
          // which the reference refuses and counts for the address alone.
          return reply(res, await withClientId(req, body, sent, `${client.clientId}-failure-${failures}`));
        }
      }
    }
    if (id === "real-clients-get-twice-the-budget" && isToken) {
      const sent = credentialsOf(req, body);
      const client = clients.find((c) => c.clientId === sent.clientId);
      if (client && sent.clientSecret !== client.clientSecret) {
        // The first budget's worth refused here, never forwarded: the reference's throttle counts only the rest.
        if (extraFailures.at(client.clientId, performance.now()).count++ < perClientId) return refuseClient(res, sent.basic);
      }
    }
    if ((id === "real-clients-failures-not-counted" || id === "success-resets-failure-count" || id === "right-secret-passes-the-throttle") && isToken) {
      const sent = credentialsOf(req, body);
      const client = clients.find((c) => c.clientId === sent.clientId);
      if (client && id === "right-secret-passes-the-throttle") {
        const answer = await forward(req, body);
        if (answer.status !== 429 || sent.clientSecret !== client.clientSecret) return reply(res, answer);
        return void res
          .writeHead(200, { "content-type": "application/json", "cache-control": "no-store" })
          .end(JSON.stringify({ access_token: `front-${Math.random().toString(36).slice(2)}`, token_type: "Bearer", expires_in: 3600, scope: contract.scopes.join(" ") }));
      }
      if (client && sent.clientSecret !== client.clientSecret) {
        // Refused here, never forwarded: the reference's budgets never see it; counted by the front alone.
        realFailures.set(client.clientId, (realFailures.get(client.clientId) ?? 0) + 1);
        return refuseClient(res, sent.basic);
      }
      if (client && id === "success-resets-failure-count") {
        if ((realFailures.get(client.clientId) ?? 0) >= perClientId) return problem(res, 429, "rate-limited", "Too many failed client authentications.", {}, { "retry-after": "60", "cache-control": "no-store" });
        const answer = await forward(req, body);
        if (answer.status === 200) realFailures.delete(client.clientId);
        return reply(res, answer);
      }
    }
    if (id === "basic-failures-not-counted" && isToken) {
      const sent = credentialsOf(req, body);
      // Refused here, never forwarded: the reference's budgets never see it.
      if (sent.basic && !knownClients.has(sent.clientId)) return refuseClient(res, true);
    }
    if (id === "throttle-window-ends-mid-check" && isToken) {
      // Each unknown client id is forwarded as one per window, so the reference's budget per client id
      // starts again at each of the front's window ends; the first comes at an id's 5th failed request.
      const sent = credentialsOf(req, body);
      if (!knownClients.has(sent.clientId)) {
        const n = (requestsOf.get(sent.clientId) ?? 0) + 1;
        requestsOf.set(sent.clientId, n);
        if (n === 5) windowsFrom ??= Date.now();
        const windowed = `${sent.clientId}~${windowsFrom === undefined ? -1 : Math.floor((Date.now() - windowsFrom) / 60_000)}`;
        return reply(res, await withClientId(req, body, sent, windowed));
      }
    }
    if ((id === "throttles-per-client-id-only" || id === "throttles-per-address-and-client-id") && isToken) {
      // The reference's 429 is kept only once the client id has spent its own budget (from this address alone,
      // for the second: its failures from other addresses are counted apart), or for the second, where it
      // is not the client id's (the address's own budget, spent over many client ids).
      const clientId = clientIdOf(req, body);
      const counted = id === "throttles-per-client-id-only" ? clientId : `${req.socket.remoteAddress} ${clientId}`;
      const count = (key: string) => failuresOf.set(key, (failuresOf.get(key) ?? 0) + 1);
      const answer = await forward(req, body);
      if (answer.status === 401) new Set([clientId, counted]).forEach(count);
      const clientsOwn = id === "throttles-per-client-id-only" || (failuresOf.get(clientId) ?? 0) >= perClientId;
      if (answer.status !== 429 || !clientsOwn || (failuresOf.get(counted) ?? 0) >= perClientId) return reply(res, answer);
      new Set([clientId, counted]).forEach(count);
      return refuseClient(res);
    }
    if (id === "no-basic-client-auth" && isToken && req.headers.authorization !== undefined) {
      const form = new URLSearchParams(body.toString("utf8"));
      if (!form.has("client_id")) {
        res.writeHead(400, { "content-type": "application/json", "cache-control": "no-store" }).end(JSON.stringify({ error: "invalid_request", error_description: "/: must have required property 'client_id'" }));
        return;
      }
    }
    if (id === "empty-secret-is-a-second-method" && isToken && sendsBasic(req) && new URLSearchParams(body.toString("utf8")).get("client_secret") === "") {
      return oauthError(res, 400, "invalid_request", "Two authentication methods.");
    }
    if (id === "accepts-two-authentication-methods" && isToken && new URLSearchParams(body.toString("utf8")).get("client_secret")) {
      delete req.headers.authorization;
      return reply(res, await forward(req, body));
    }
    if (id === "last-repeated-parameter-wins" && isToken) {
      return reply(res, await forward(req, Buffer.from(new URLSearchParams(Object.fromEntries(new URLSearchParams(body.toString("utf8")))).toString())));
    }
    if (id === "repairs-invalid-utf8" && mediaTypeOf(req.headers["content-type"]) === "application/json") {
      return reply(res, await forward(req, Buffer.from(body.toString("utf8"), "utf8")));
    }

    if (id === "repairs-lone-surrogates" && mediaTypeOf(req.headers["content-type"]) === "application/json") {
      let repaired = false;
      const repair = (_key: string, v: unknown) => (typeof v === "string" && /\p{Cs}/u.test(v) ? ((repaired = true), v.replace(/\p{Cs}/gu, "\uFFFD")) : v);
      let text: string | undefined;
      try {
        text = JSON.stringify(JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body)), repair);
      } catch {
        // Not UTF-8, or not JSON: the reference answers that as it would.
      }
      return reply(res, await forward(req, repaired && text !== undefined ? Buffer.from(text) : body));
    }
    if (id === "500-on-deep-nesting" && mediaTypeOf(req.headers["content-type"]) === "application/json" && /^\s*\[{1000}/.test(body.toString("latin1"))) {
      return crash(res, "Maximum call stack size exceeded.");
    }
    // Python's urllib.parse.unquote(errors="strict") and decodeURIComponent throw on a percent sign without two hex digits.
    if (id === "json-depth-limit-of-8" && !isToken && depthOf(body.toString("utf8")) > 8) {
      return problem(res, 400, "malformed-request", "The body is nested too deeply.");
    }
    if (id === "http-layer-refuses-malformed-request-targets" && /%(?![0-9a-f]{2})/i.test(req.url ?? "")) {
      return void res.writeHead(400, { "content-type": "text/html" }).end("<h1>400 Bad Request</h1>URISyntaxException thrown");
    }
    if (id === "500-on-malformed-percent-escapes" && /%(?![0-9a-f]{2})/i.test((req.url ?? "").split("?")[1] ?? "")) {
      return crash(res, "URIError: URI malformed.");
    }
    // Python's int() of a JSON integer over 4,300 digits raises ValueError.
    if (id === "500-on-5000-digit-integers" && mediaTypeOf(req.headers["content-type"]) === "application/json" && /\d{4301,}/.test(body.toString("latin1"))) {
      return crash(res, "ValueError: Exceeds the limit (4300 digits) for integer string conversion.");
    }
    // A JSON parser that reads a surrogate pair's escapes one at a time, each a lone surrogate.
    if (id === "refuses-escaped-surrogate-pairs" && mediaTypeOf(req.headers["content-type"]) === "application/json" && /\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}/i.test(body.toString("latin1"))) {
      return problem(res, 400, "malformed-request", "The body holds a lone surrogate.", { errors: [{ pointer: "", detail: "lone surrogate" }] });
    }
    // A second decoding of the query: %25 read as %, so 1000%2531 reaches the code as 10001.
    if (id === "decodes-queries-twice" && (req.url ?? "").includes("?")) req.url = req.url!.replace(/%25([0-9a-f]{2})/gi, "%$1");
    // A parser that reads 1e400 as Infinity, which the code then cannot store or compare.
    if (id === "500-on-numbers-beyond-double-range" && mediaTypeOf(req.headers["content-type"]) === "application/json" && /:\s*-?\d+(\.\d+)?[eE]\+?\d{3,}/.test(body.toString("utf8"))) {
      return crash(res, "OverflowError: cannot convert float infinity to integer.");
    }
    // PHP's $_GET: a parameter named name[] is an array, which the code then reads as a string.
    if (id === "500-on-array-parameters" && arrayParameter("i").test(req.url ?? "")) {
      return crash(res, "Array to string conversion.");
    }
    if (id === "500-on-null-member" && mediaTypeOf(req.headers["content-type"]) === "application/json" && /:\s*null\b/.test(body.toString("utf8"))) {
      return crash(res, "Cannot read properties of null.");
    }
    if (id === "500-on-malformed-json" && mediaTypeOf(req.headers["content-type"]) === "application/json" && body.length > 0) {
      try {
        JSON.parse(body.toString("utf8"));
      } catch {
        return crash(res, "Unexpected token.");
      }
    }

    if (keepsTokens && isToken) {
      const answer = await forward(req, body);
      if (answer.status === 200) {
        const { access_token: issued, scope } = JSON.parse(answer.body.toString("utf8")) as { access_token: string; scope: string };
        const set = `${clientIdOf(req, body)} ${scope.split(" ").sort().join(" ")}`;
        const number = (issuedPerSet.get(set) ?? 0) + 1;
        issuedPerSet.set(set, number);
        kept.set(issued, { current: issued, asked: askedAs(req, body), set, number });
      }
      return reply(res, answer);
    }
    if (keepsTokens) {
      const presented = bearerOf(req);
      const held = presented !== undefined ? kept.get(presented) : undefined;
      if (!held) return reply(res, await forward(req, body));
      // cap-per-scope-set: live while fewer than 100 newer tokens of its client and scopes were issued.
      const live = id === "no-live-token-cap" || issuedPerSet.get(held.set)! - held.number < 100;
      return reply(res, live ? await forwardKeptAlive(req, body, held) : await forward(req, body, { authorization: `Bearer ${held.current}` }));
    }
    if ((id === "no-scope-check" || id === "scope-confusion") && isToken) {
      const answer = await forward(req, body);
      const form = new URLSearchParams(body.toString("utf8"));
      const widens = id === "no-scope-check" || (form.get("scope") ?? "").trim().split(/\s+/).length >= 2;
      if (answer.status === 200 && widens) {
        // The same client without `scope`: every scope it may have (D11).
        form.delete("scope");
        const full = await forward(req, Buffer.from(form.toString()));
        const issued = (JSON.parse(answer.body.toString("utf8")) as { access_token: string }).access_token;
        widened.set(issued, (JSON.parse(full.body.toString("utf8")) as { access_token: string }).access_token);
      }
      return reply(res, answer);
    }
    if (id === "no-scope-check" || id === "scope-confusion") {
      const presented = bearerOf(req);
      const wide = presented !== undefined ? widened.get(presented) : undefined;
      return reply(res, await forward(req, body, wide ? { authorization: `Bearer ${wide}` } : {}));
    }

    const unservedZip = (): boolean => {
      try {
        return (JSON.parse(body.toString("utf8")) as { zipCode?: unknown }).zipCode === UNSERVED_ZIP;
      } catch {
        return false;
      }
    };
    if (
      (id === "unknown-category-matches-nothing" || (id === "unknown-category-matches-nothing-where-none-serve" && unservedZip())) &&
      req.method === create.method &&
      path === create.path
    ) {
      const answer = await forward(req, body);
      if (answer.status !== 404) return reply(res, answer);
      // The reference's 201 for a category it has, at a zip code no business serves, given the category sent.
      const sent = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      const unmatched = await forward(req, Buffer.from(JSON.stringify({ ...sent, categoryID: knownCategory, zipCode: "00000" })));
      const stored = JSON.parse(unmatched.body.toString("utf8")) as Record<string, unknown>;
      unmatched.body = Buffer.from(JSON.stringify({ ...stored, categoryID: sent.categoryID, zipCode: sent.zipCode }));
      return reply(res, unmatched);
    }
    if (id === "search-ignores-category" && req.method === search.method && path === search.path) {
      // The zip code's businesses of every category, best rated first, whatever category was asked for.
      const query = new URL(req.url ?? "", "http://front").searchParams;
      const asked = await forward(req, body);
      if (asked.status !== 200) return reply(res, asked);
      const found = new Map<string, { rating?: number }>();
      for (const { categoryID } of seed.categories) {
        query.set("category_id", categoryID);
        const answer = await forward(Object.assign(req, { url: `${path}?${query}` }), body);
        if (answer.status !== 200) return reply(res, answer);
        for (const b of (JSON.parse(answer.body.toString("utf8")) as { businesses: { businessID: string; rating?: number }[] }).businesses) found.set(b.businessID, b);
      }
      const businesses = [...found.values()].sort((a, b) => (b.rating ?? 0) - (a.rating ?? 0));
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ businesses }));
    }
    // A search that finds nothing asked again without what it ignores: at the example's zip code, or for its category.
    const ignored: [string, string] | undefined = id === "search-ignores-zip" ? ["zip", knownZip] : id === "search-ignores-unknown-category" ? ["category_id", knownCategory] : undefined;
    if (ignored && req.method === search.method && path === search.path) {
      const [name, known] = ignored;
      const answer = await forward(req, body);
      const query = new URL(req.url ?? "", "http://front").searchParams;
      if (answer.status !== 200 || (JSON.parse(answer.body.toString("utf8")) as { businesses: unknown[] }).businesses.length > 0 || !query.has(name)) return reply(res, answer);
      query.set(name, known);
      return reply(res, await forward(Object.assign(req, { url: `${path}?${query}` }), body));
    }
    if (id === "matching-ignores-zip" && req.method === create.method && path === create.path) {
      const answer = await forward(req, body);
      const stored = answer.status === 201 ? (JSON.parse(answer.body.toString("utf8")) as { leads: unknown[]; zipCode: string }) : undefined;
      if (!stored || stored.leads.length > 0) return reply(res, answer);
      // Matched again at the example's zip code, and answered with the zip code sent.
      const matched = await forward(req, Buffer.from(JSON.stringify({ ...(JSON.parse(body.toString("utf8")) as object), zipCode: knownZip })));
      if (matched.status === 201) matched.body = Buffer.from(JSON.stringify({ ...(JSON.parse(matched.body.toString("utf8")) as object), zipCode: stored.zipCode }));
      return reply(res, matched);
    }
    const form = isToken ? new URLSearchParams(body.toString("utf8")) : undefined;
    if (id === "refuses-unknown-token-parameters" && form && [...form.keys()].some((name) => !["grant_type", "client_id", "client_secret", "scope"].includes(name))) {
      return oauthError(res, 400, "invalid_request", "Unknown parameter.");
    }
    if (id === "requires-scope-parameter" && form && !form.has("scope") && body.length > 0) return oauthError(res, 400, "invalid_scope", "scope is required.");
    if (id === "empty-scope-is-invalid" && form?.get("scope") === "") return oauthError(res, 400, "invalid_scope", "scope is empty.");
    if (id === "basic-refuses-same-client-id" && form?.has("client_id") && sendsBasic(req)) {
      return oauthError(res, 400, "invalid_request", "Two authentication methods.");
    }
    if (id === "basic-ignores-other-client-id" && form?.has("client_id") && !form.has("client_secret") && sendsBasic(req)) {
      form.delete("client_id");
      return reply(res, await forward(req, Buffer.from(form.toString())));
    }
    if (id === "malformed-basic-is-invalid-client" && isToken && sendsBasic(req) && typeof basicCredentials(req.headers.authorization) !== "object") {
      return refuseClient(res, true);
    }
    if (id === "reads-created-resources" && req.method === "GET" && [register.path, create.path].some((p) => path === p || path.startsWith(`${p}/`))) {
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ items: [] }));
    }
    const type = String(req.headers["content-type"] ?? "");
    if (
      (id === "accepts-text-json" && mediaTypeOf(type) === "text/json") ||
      (id === "ignores-charset" && /charset=iso-8859-1/i.test(type)) ||
      (id === "accepts-json-prefixed-types" && /^application\/json(-seq|p)\b/i.test(type)) ||
      (id === "accepts-json-suffix-types" && /^application\/[\w.-]+\+json\b/i.test(type)) ||
      (id === "takes-utf8-as-a-charset" && /charset="?utf8"?/i.test(type)) ||
      (id === "reads-bodies-without-content-type" && type === "" && body.length > 0 && !isToken)
    ) {
      return reply(res, await forward(req, body, { "content-type": "application/json" }));
    }
    if (id === "compares-ids-as-numbers" && !isToken) {
      // Ids read as numbers: leading zeros dropped from the query's and the body's ids before the reference sees them.
      const [pathname, query = ""] = (req.url ?? "").split("?");
      req.url = `${pathname}${query ? `?${query.replace(/(_id=)0+(?=\d)/g, "$1")}` : ""}`;
      const zeros = /("\w+ID"\s*:\s*")0+(?=\d)/g;
      // Other bodies go on byte for byte (one that is not UTF-8 must stay so).
      return reply(res, await forward(req, zeros.test(body.toString("utf8")) ? Buffer.from(body.toString("utf8").replace(zeros, "$1")) : body));
    }
    if (id === "reads-array-parameters") req.url = (req.url ?? "").replace(arrayParameter("gi"), "$1=");
    if (id === "reads-zip-plus-four") req.url = (req.url ?? "").replace(/(zip=\d{5})-\d{4}(?=&|$)/, "$1");
    if (id === "reads-signed-zip-codes") req.url = (req.url ?? "").replace(/(zip=)(?:%2B|-)(\d{4})(?=&|$)/i, "$10$2");
    if (id === "answers-reads-in-plain-text" && req.method === "GET" && (path.startsWith(`${register.path}/`) || path.startsWith(`${create.path}/`))) {
      // A router's own 404 (Go's ServeMux: "404 page not found").
      return void res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("404 page not found\n");
    }
    if (id === "trims-query-values" && path === search.path) {
      const query = new URL(req.url ?? "", "http://front").searchParams;
      for (const [name, value] of [...query]) query.set(name, value.trim());
      req.url = `${path}?${query}`;
    }
    if (id === "zip-matches-before-a-line-feed") req.url = (req.url ?? "").replace(/(zip=\d{5})%0A/gi, "$1");
    // Arabic-Indic digits (UTF-8 D9 A0 to D9 A9) in the query read as ASCII ones.
    if (id === "digits-in-any-script") req.url = (req.url ?? "").replace(/%D9%A([0-9])/gi, "$1");
    // Read leniently (lenientReadings); other bodies go on byte for byte (one that is not UTF-8 must stay so).
    const lenient = isToken ? undefined : lenientReadings[id]?.(body.toString("utf8"));
    const changed = lenient !== undefined && lenient !== body.toString("utf8");
    const answer = await forward(req, changed ? Buffer.from(lenient) : body);
    const sent = (() => {
      try {
        return JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      } catch {
        return {};
      }
    })();
    const rewrite = (change: (value: Record<string, any>) => void) => {
      const value = JSON.parse(answer.body.toString("utf8")) as Record<string, any>;
      change(value);
      answer.body = Buffer.from(JSON.stringify(value));
    };
    if (id === "answers-in-its-own-form" && answer.status === 201) {
      rewrite((r) => {
        if (Array.isArray(r.events)) r.events.reverse();
        if (r.customer && typeof r.customer === "object") r.customer.loyaltyTier = "gold";
        const own = { partnerID: "7", ...r };
        for (const key of Object.keys(r)) delete r[key];
        Object.assign(r, own);
      });
    }
    if (id === "answers-in-its-own-form" && answer.status === 422) {
      // Words of its own that generated secrets hold too (fast-check favours the names objects have): none is quoted from the request.
      rewrite((p) => (p.detail = `${String(p.detail)} Look at the properties named: propertyIsEnumerable, __lookupGetter__, __defineSetter__, hasOwnProperty, isPrototypeOf, toLocaleString, constructor, valueOf.`));
    }
    if (id === "answers-in-its-own-form" && answer.status === 403 && typeof answer.headers["www-authenticate"] === "string") {
      answer.headers["www-authenticate"] = `DPoP algs="ES256 PS256", ${answer.headers["www-authenticate"].replace(/error="insufficient_scope", /, "")}`;
    }
    if (id === "answers-in-its-own-form" && answer.status === 401 && typeof answer.headers["www-authenticate"] === "string") {
      // Several challenges (RFC 9110 §11.6.1): in one line on the API, in two lines at the token endpoint.
      const challenge = answer.headers["www-authenticate"];
      answer.headers["www-authenticate"] = isToken ? ['DPoP algs="ES256"', challenge] : `DPoP algs="ES256", ${challenge}`;
    }
    if (id === "answers-in-its-own-form" && answer.status === 201 && typeof answer.headers.location === "string") {
      // Relative to the request's URI (its last segment replaced), the id's first digit percent-encoded.
      const [, collection, first, rest] = /\/([^/]+)\/([0-9])([^/]*)$/.exec(answer.headers.location) ?? [];
      if (collection !== undefined) answer.headers.location = `${collection}/%${first!.charCodeAt(0).toString(16).toUpperCase()}${rest}`;
    }
    if (id === "location-on-another-origin" && answer.status === 201 && typeof answer.headers.location === "string") {
      answer.headers.location = `https://api.partner-platform.example${answer.headers.location}`;
    }
    if (id === "location-with-a-query" && answer.status === 201 && typeof answer.headers.location === "string") answer.headers.location += "?created=1";
    if (id === "created-at-in-local-time" && (creating || registering) && answer.status === 201) {
      rewrite((r) => (r.createdAt = new Date(Date.parse(String(r.createdAt)) - 5 * 3600_000).toISOString()));
    }
    if (id === "one-lead-id-for-all" && creating && answer.status === 201) rewrite((r) => (Array.isArray(r.leads) ? r.leads.forEach((l: { leadID: string }) => (l.leadID = "1")) : undefined));
    // Registered as if it were https, and answered with the URL sent.
    if (id === "accepts-http-webhook-urls" && changed && answer.status === 201) rewrite((w) => (w.url = sent.url));
    if (id === "lower-cases-emails" && creating && answer.status === 201) rewrite((r) => (r.customer.email = String(r.customer.email).toLowerCase()));
    if (id === "rewrites-webhook-urls" && registering && answer.status === 201) rewrite((w) => (w.url = new URL(String(w.url)).href));
    if (id === "normalizes-names-to-nfc" && creating && answer.status === 201) rewrite((r) => (r.customer.name = String(r.customer.name).normalize("NFC")));
    if (id === "trims-names" && creating && answer.status === 201) rewrite((r) => (r.customer.name = String(r.customer.name).trim()));
    if (id === "labels-search-latin-1" && req.method === search.method && path === search.path && answer.status === 200) answer.headers["content-type"] = "application/json; charset=iso-8859-1";
    if ((id === "names-the-first-error-only" || id === "names-the-first-two-errors-only") && answer.status === 422) rewrite((p) => (p.errors = (p.errors as unknown[]).slice(0, id === "names-the-first-error-only" ? 1 : 2)));
    if (id === "returns-the-secret" && registering && answer.status === 201) rewrite((w) => (w.secret = sent.secret));
    if (id === "masks-the-secret-but-2-at-each-end" && registering && answer.status === 201 && typeof sent.secret === "string") {
      const chars = [...(sent.secret as string)];
      rewrite((w) => (w.secretMask = [...chars.slice(0, 2), ..."*".repeat(Math.max(0, chars.length - 4)), ...chars.slice(-2)].join("")));
    }
    if (id === "hints-the-secret-in-3-characters" && registering && answer.status === 201 && typeof sent.secret === "string") rewrite((w) => (w.secretHint = `…${[...(sent.secret as string)].slice(-3).join("")}`));
    // Go's secret[:4] and secret[len(secret)-4:]: bytes, a character cut in two written as U+FFFD by encoding/json.
    if (id === "hints-the-secret-in-4-bytes" && registering && answer.status === 201 && typeof sent.secret === "string") {
      const bytes = Buffer.from(sent.secret as string, "utf8");
      rewrite((w) => (w.secretHint = `${bytes.subarray(0, 4).toString("utf8")}****${bytes.subarray(-4).toString("utf8")}`));
    }
    if (id === "hints-the-secret-in-4-characters" && registering && answer.status === 201 && typeof sent.secret === "string") rewrite((w) => (w.secretEnding = [...(sent.secret as string)].slice(-4).join("")));
    if (id === "returns-a-secret-hint" && registering && answer.status === 201 && typeof sent.secret === "string") rewrite((w) => (w.secretHint = (sent.secret as string).slice(0, 8)));
    // Where its last 8 characters can be a header's (printable ASCII).
    if (id === "hints-the-secret-in-a-header" && registering && answer.status === 201 && typeof sent.secret === "string" && /^[\x20-\x7e]{8}$/.test(sent.secret.slice(-8))) {
      answer.headers["x-webhook-secret-hint"] = sent.secret.slice(-8);
    }
    if (id === "returns-the-secret-escaped" && registering && answer.status === 201 && typeof sent.secret === "string") {
      // Each UTF-16 unit as \uXXXX (an astral character as its surrogate pair, as JSON writes it).
      const escaped = sent.secret.split("").map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
      answer.body = Buffer.from(`{"secretRef":"${escaped}",${answer.body.toString("utf8").trimStart().slice(1)}`);
    }
    if (id === "returns-the-secret-reversed" && registering && answer.status === 201 && typeof sent.secret === "string") {
      rewrite((w) => (w.secretCheck = [...(sent.secret as string)].reverse().join("")));
    }
    // Where its first 6 characters can be a header's (printable ASCII).
    if (id === "hints-the-secret-in-upper-case" && registering && answer.status === 201 && typeof sent.secret === "string" && /^[\x20-\x7e]{6}$/.test(sent.secret.slice(0, 6))) {
      answer.headers["x-secret-hint"] = sent.secret.slice(0, 6).toUpperCase();
    }
    if (id === "returns-a-digest-of-the-secret" && registering && answer.status === 201 && typeof sent.secret === "string") {
      rewrite((w) => (w.secretFingerprint = `sha256:${createHash("sha256").update(sent.secret as string, "utf8").digest("hex")}`));
    }
    if (id === "returns-the-secret-in-base64" && registering && answer.status === 201 && typeof sent.secret === "string") {
      rewrite((w) => (w.secretRef = Buffer.from(sent.secret as string, "utf8").toString("base64")));
    }
    if (id === "unescaped-pointers" && answer.status === 422) {
      rewrite((p) => {
        for (const e of p.errors as { pointer: string }[]) e.pointer = e.pointer.replace(/~1/g, "/").replace(/~0/g, "~");
      });
    }
    if (id === "quotes-the-secret-in-problems" && registering && answer.status >= 400 && typeof sent.secret === "string") {
      rewrite((p) => (p.detail = `${String(p.detail)} (secret "${String(sent.secret)}")`));
    }
    if (id === "answers-another-customer" && creating && answer.status === 201) {
      rewrite((r) => {
        const own = r.customer;
        if (lastCustomer !== undefined) r.customer = lastCustomer;
        lastCustomer = own;
      });
    }
    if (id === "registers-for-another-business" && registering && answer.status === 201) rewrite((w) => (w.businessID = w.businessID === "4713" ? "4712" : "4713"));
    if (id === "creates-webhooks-disabled" && registering && answer.status === 201) rewrite((w) => (w.status = "disabled"));
    if (id === "leads-for-every-category" && creating && answer.status === 201) {
      rewrite((r) => {
        const others = seed.businesses.filter((b) => b.serviceZipCodes.includes(r.zipCode) && !r.leads.some((l: { businessID: string }) => l.businessID === b.businessID));
        r.leads.push(...others.map((b) => ({ leadID: String(900_000_000_000 + ++madeUpLeads), businessID: b.businessID })));
        if (r.leads.length > 0) r.status = "matched";
      });
    }
    if (id === "matched-without-leads" && creating && answer.status === 201) rewrite((r) => (r.status = r.status === "matched" ? "unmatched" : "matched"));
    if (id === "search-worst-rated-first" && req.method === search.method && path === search.path && answer.status === 200) rewrite((r) => r.businesses.reverse());
    if (id === "lists-each-match-twice" && req.method === search.method && path === search.path && answer.status === 200) {
      rewrite((r) => (r.businesses = r.businesses.flatMap((b: unknown) => [b, b])));
    }
    if (id === "lists-each-match-twice" && creating && answer.status === 201) {
      // The second lead of each business with an id of its own (ids are digits: D14).
      rewrite((r) => (r.leads = r.leads.flatMap((l: { leadID: string }) => [l, { ...l, leadID: `${l.leadID}0` }])));
    }
    if (id === "tokens-say-60-seconds" && isToken && answer.status === 200) rewrite((t) => (t.expires_in = 60));
    if (id === "grants-scopes-not-asked" && isToken && answer.status === 200) rewrite((t) => (t.scope = contract.scopes.join(" ")));
    if (id === "insufficient-scope-as-business-forbidden" && answer.status === 403) {
      rewrite((p) => (p.type = p.type === contract.problem("insufficient-scope").type ? contract.problem("business-forbidden").type : p.type));
    }
    if (id === "401-says-insufficient-scope" && answer.status === 401 && typeof answer.headers["www-authenticate"] === "string") {
      answer.headers["www-authenticate"] = answer.headers["www-authenticate"].replace('error="invalid_token"', 'error="insufficient_scope"');
    }
    if (id === "scope-challenge-not-bearer" && answer.status === 403 && typeof answer.headers["www-authenticate"] === "string") {
      answer.headers["www-authenticate"] = answer.headers["www-authenticate"].replace(/^Bearer error="insufficient_scope", /, 'Basic realm="api", ');
    }
    if ((id === "location-under-another-path" || id === "reuses-ids") && answer.status === 201 && typeof answer.headers.location === "string") {
      const own = registering ? register.path : create.path;
      if (id === "location-under-another-path") answer.headers.location = answer.headers.location.replace(own, registering ? create.path : register.path);
      else {
        const member = registering ? "webhookID" : "requestID";
        rewrite((r) => (r[member] = "1"));
        answer.headers.location = answer.headers.location.replace(/[^/]+$/, "1");
      }
    }
    if (id === "unknown-business-forbidden" && req.method === register.method && path === register.path && answer.status === 404) {
      return problem(res, 403, "business-forbidden", "This client does not act for that business.", { errors: [{ pointer: "/businessID", detail: "not a business of this client" }] });
    }
    if (id === "search-unknown-category-404" && req.method === search.method && path === search.path && answer.status === 200) {
      if ((JSON.parse(answer.body.toString("utf8")) as { businesses: unknown[] }).businesses.length === 0) return problem(res, 404, "not-found", "No business serves that category.");
    }
    if (id === "wrong-type-response-field" && req.method === search.method && path === search.path && answer.status === 200) {
      const result = JSON.parse(answer.body.toString("utf8")) as { businesses: { reviewCount: unknown }[] };
      for (const business of result.businesses) business.reviewCount = String(business.reviewCount);
      answer.body = Buffer.from(JSON.stringify(result));
    }
    if (id === "location-without-id" && answer.status === 201 && typeof answer.headers.location === "string") {
      answer.headers.location = answer.headers.location.replace(/\/[^/]+$/, "");
    }
    reply(res, answer);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`front: ${error.message}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      await new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      });
      await Promise.all([...fromAddress.values()].map((agent) => agent.close()));
    },
  };
}
