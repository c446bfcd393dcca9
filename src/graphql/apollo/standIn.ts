import { type DocumentNode, Kind, parse } from 'graphql'

/**
 * Apollo does not let a plugin replace its parser or skip its validation: text and documents tollbooth refuses are
 * swapped for these stand-ins, which Apollo parses, validates and caches instead, and the refusal is answered.
 */

/** What Apollo parses in place of text refused before parsing. */
export const REFUSED_TEXT_STAND_IN = '{ __typename }'

/** The name of the operation Apollo validates and caches in place of a document refused before validation. */
const REFUSED_DOCUMENT_NAME = 'TollboothRefusedDocument'

/**
 * What Apollo validates in place of a document refused after parsing (its text, or its shape by the structural
 * rules): Apollo caches it under the refused text's hash, so the name tells it apart when it comes back from a
 * document store that hands back copies.
 */
const REFUSED_DOCUMENT_TEXT = `query ${REFUSED_DOCUMENT_NAME} { __typename }`
export const REFUSED_DOCUMENT_STAND_IN: DocumentNode = parse(REFUSED_DOCUMENT_TEXT)

export const STAND_IN_PASSES =
  'tollbooth: the document store holds the stand-in of a document another configuration refused, and this one ' +
  'admits it: clear the document store shared by instances with different limits.'

/**
 * Whether Apollo handed back the stand-in for `source`: the stand-in itself, or a copy of it, for text that is not
 * the stand-in's own (a client may send that, and name an operation so).
 */
export function isRefusedDocumentStandIn(document: DocumentNode, source: string): boolean {
  if (source === REFUSED_DOCUMENT_TEXT) return false
  if (document === REFUSED_DOCUMENT_STAND_IN) return true
  const [only] = document.definitions
  const [selection] = only?.kind === Kind.OPERATION_DEFINITION ? only.selectionSet.selections : []
  return (
    document.definitions.length === 1 &&
    only?.kind === Kind.OPERATION_DEFINITION &&
    only.name?.value === REFUSED_DOCUMENT_NAME &&
    only.selectionSet.selections.length === 1 &&
    selection?.kind === Kind.FIELD &&
    selection.name.value === '__typename'
  )
}

/** Replaces the document Apollo is about to validate (its request context's field is read-only in its types). */
export function setDocument(requestContext: { document?: DocumentNode }, document: DocumentNode): void {
  ;(requestContext as { document: DocumentNode }).document = document
}
