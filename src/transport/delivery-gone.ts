/**
 * How a settlement says the delivery can no longer be settled at all: its
 * channel closed, its lease ended, or it was settled already. The broker or
 * store then gives the message out again by itself, so trying the settlement
 * again is pointless. Transports mark such errors with `deliveryGone: true`;
 * checked by that brand, not by class, so it holds across package copies.
 */
export interface DeliveryGone {
  readonly deliveryGone: true;
}

/** Whether a settlement failed because its delivery is gone (see {@link DeliveryGone}). */
export function isDeliveryGone(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as Partial<DeliveryGone>).deliveryGone === true;
}
