// SPDX-License-Identifier: MIT
/*
 * Linked into the static build only (see the Makefile): libmicrohttpd.a refers to GnuTLS for
 * HTTPS, which the exporter never turns on. These stand-ins take GnuTLS's place, so that
 * the one static binary does not carry a TLS stack and its dependencies. Initialisation
 * succeeds (libmicrohttpd calls it when it loads); anything else fails.
 */
#define GS_TLS_FAIL (-50) /* GNUTLS_E_INVALID_REQUEST */

int gnutls_global_init(void);
void gnutls_global_deinit(void);

int gnutls_global_init(void)
{
	return 0;
}

void gnutls_global_deinit(void)
{
}

int gnutls_alpn_set_protocols(void);
int gnutls_alpn_set_protocols(void)
{
	return GS_TLS_FAIL;
}

int gnutls_bye(void);
int gnutls_bye(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_allocate_credentials(void);
int gnutls_certificate_allocate_credentials(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_free_credentials(void);
int gnutls_certificate_free_credentials(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_server_set_request(void);
int gnutls_certificate_server_set_request(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_set_dh_params(void);
int gnutls_certificate_set_dh_params(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_set_retrieve_function2(void);
int gnutls_certificate_set_retrieve_function2(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_set_retrieve_function3(void);
int gnutls_certificate_set_retrieve_function3(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_set_x509_key_mem(void);
int gnutls_certificate_set_x509_key_mem(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_set_x509_key_mem2(void);
int gnutls_certificate_set_x509_key_mem2(void)
{
	return GS_TLS_FAIL;
}

int gnutls_certificate_set_x509_trust_mem(void);
int gnutls_certificate_set_x509_trust_mem(void)
{
	return GS_TLS_FAIL;
}

int gnutls_cipher_get(void);
int gnutls_cipher_get(void)
{
	return GS_TLS_FAIL;
}

int gnutls_credentials_set(void);
int gnutls_credentials_set(void)
{
	return GS_TLS_FAIL;
}

int gnutls_deinit(void);
int gnutls_deinit(void)
{
	return GS_TLS_FAIL;
}

int gnutls_dh_params_deinit(void);
int gnutls_dh_params_deinit(void)
{
	return GS_TLS_FAIL;
}

int gnutls_dh_params_import_pkcs3(void);
int gnutls_dh_params_import_pkcs3(void)
{
	return GS_TLS_FAIL;
}

int gnutls_dh_params_init(void);
int gnutls_dh_params_init(void)
{
	return GS_TLS_FAIL;
}

int gnutls_handshake(void);
int gnutls_handshake(void)
{
	return GS_TLS_FAIL;
}

int gnutls_init(void);
int gnutls_init(void)
{
	return GS_TLS_FAIL;
}

int gnutls_priority_deinit(void);
int gnutls_priority_deinit(void)
{
	return GS_TLS_FAIL;
}

int gnutls_priority_init(void);
int gnutls_priority_init(void)
{
	return GS_TLS_FAIL;
}

int gnutls_priority_set(void);
int gnutls_priority_set(void)
{
	return GS_TLS_FAIL;
}

int gnutls_protocol_get_version(void);
int gnutls_protocol_get_version(void)
{
	return GS_TLS_FAIL;
}

int gnutls_psk_allocate_server_credentials(void);
int gnutls_psk_allocate_server_credentials(void)
{
	return GS_TLS_FAIL;
}

int gnutls_psk_free_server_credentials(void);
int gnutls_psk_free_server_credentials(void)
{
	return GS_TLS_FAIL;
}

int gnutls_psk_set_server_credentials_function(void);
int gnutls_psk_set_server_credentials_function(void)
{
	return GS_TLS_FAIL;
}

int gnutls_record_check_pending(void);
int gnutls_record_check_pending(void)
{
	return GS_TLS_FAIL;
}

int gnutls_record_get_direction(void);
int gnutls_record_get_direction(void)
{
	return GS_TLS_FAIL;
}

int gnutls_record_recv(void);
int gnutls_record_recv(void)
{
	return GS_TLS_FAIL;
}

int gnutls_record_send(void);
int gnutls_record_send(void)
{
	return GS_TLS_FAIL;
}

int gnutls_session_get_ptr(void);
int gnutls_session_get_ptr(void)
{
	return GS_TLS_FAIL;
}

int gnutls_session_set_ptr(void);
int gnutls_session_set_ptr(void)
{
	return GS_TLS_FAIL;
}

int gnutls_strerror(void);
int gnutls_strerror(void)
{
	return GS_TLS_FAIL;
}

int gnutls_transport_set_int2(void);
int gnutls_transport_set_int2(void)
{
	return GS_TLS_FAIL;
}

/* (a variable in GnuTLS: its allocator) */
#include <stdlib.h>
void *(*gnutls_malloc)(size_t) = malloc;
