import type { SessionsStore } from '../storage/sessions-store.js';
import type { UsersStore } from '../storage/users-store.js';
import { hashPassword } from './passwords.js';

/**
 * Gives a user a new password and ends every dashboard session they have, in every running server at once
 * (sessions live in the database): whoever had the old password is signed out. The hash is stored first, so a
 * sign-in still checking the old one either gets a session this deletes, or finds the hash changed when it starts
 * its session (Sessions.start) and is refused.
 *
 * @example
 * await resetPassword(store, user.id, 'a new password');
 */
export async function resetPassword(store: { users: UsersStore; sessions: SessionsStore }, userId: string, password: string): Promise<void> {
  await store.users.setPassword(userId, await hashPassword(password));
  await store.sessions.deleteForUser(userId);
}
